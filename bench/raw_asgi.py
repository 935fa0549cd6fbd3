"""The API bench's raw baselines, served by the same uvicorn as Mneme's API and loaded by the same generator in
the same run:

- ``app``: the smallest ASGI app that reads a POST body and answers 202 with a short JSON body — what this box's
  HTTP stack and load generator cost before Mneme does anything;
- ``redis_app``: the same plus the least an accept must do in Redis, in one redis-py pipeline (one round trip):
  append the body to the session's capped list, write the job record, add it to a pending set and push a task
  onto a list — what one Redis round trip per request costs on this box (the URL from ``RAW_ASGI_REDIS_URL``).

``serve`` runs one of them as the stack runs Mneme's API.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

TASKS, PENDING = "raw:tasks", "raw:pending"  # each accepted job's key is pushed onto TASKS (bench.raw_pipeline)
ANSWER = b'{"accepted":true}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]
_client: list[redis.Redis] = []


async def _body(receive: Any) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


async def _answer(send: Any) -> None:
    await send({"type": "http.response.start", "status": 202, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await _body(receive)
    await _answer(send)


async def redis_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await _body(receive)
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["RAW_ASGI_REDIS_URL"]))
    message = json.loads(body)
    window, job = f"raw:wm:{message['session_id']}", f"raw:job:{message['message_id']}"
    pipe = _client[0].pipeline(transaction=False)
    pipe.rpush(window, body).ltrim(window, -50, -1).expire(window, 7 * 86400)
    pipe.hset(job, mapping={"state": "accepted", "payload": body}).expire(job, 7 * 86400)
    pipe.zadd(PENDING, {job: time.time()}).lpush(TASKS, job)
    pipe.execute()
    await _answer(send)


@contextmanager
def serve(app: str, redis_url: str = "", workers: int = 1) -> Iterator[tuple[int, int]]:
    """This module's ``app`` under the uvicorn Mneme's API runs on (httptools, uvloop, no access log), on a free
    port: the port and the server's process id, until the block ends."""
    from workers.local.stack import free_port  # here: the servers importing this module need none of the stack

    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", f"bench.raw_asgi:{app}", "--host", "127.0.0.1", "--port", str(port),
           "--no-access-log", "--log-level", "warning", *(["--workers", str(workers)] if workers > 1 else [])]
    server = subprocess.Popen(cmd, cwd=Path(__file__).parent.parent, start_new_session=True,
                              env=os.environ | {"RAW_ASGI_REDIS_URL": redis_url})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"the raw ASGI baseline {app} did not start") from None
                time.sleep(0.1)
        yield port, server.pid
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
