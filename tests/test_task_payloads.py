"""No user content in task arguments or logs: every task message any process puts on the broker (watched with
Redis MONITOR, which sees each push, the ones inside Lua scripts too) carries ids, not a user's words — so
Flower, dead letters and a redrive have nothing to show or keep — and no log line holds message text, queries
or belief objects."""

from __future__ import annotations

import base64
import json
import re
import threading
import time

import httpx
import redis

from tests.polling import wait_until
from workers.celery_app import QUEUES

_ARG = re.compile(rb'"((?:\\.|[^"\\])*)"')
_ESCAPE = re.compile(rb'\\(x[0-9a-fA-F]{2}|.)', re.S)
_NAMED = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}


def _unescape(arg: bytes) -> bytes:
    """One argument of a MONITOR line back to its bytes (Redis writes them with ``sdscatrepr``)."""
    def one(m: re.Match) -> bytes:
        code = m.group(1)
        return bytes([int(code[1:], 16)]) if code[:1] == b"x" and len(code) == 3 else _NAMED.get(code, code)
    return _ESCAPE.sub(one, arg)


class Published(threading.Thread):
    """Every task message pushed onto a Celery queue while it runs, decoded (headers and body)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.connection = redis.Redis.from_url(url).connection_pool.get_connection()
        self.connection.send_command("MONITOR")
        assert self.connection.read_response() in (b"OK", "OK")
        self.messages: list[dict] = []
        self.halt = threading.Event()

    def run(self) -> None:
        queues = {q.encode() for q in QUEUES}
        while not self.halt.is_set():
            if not self.connection.can_read(timeout=0.2):
                continue
            line = self.connection.read_response(disable_decoding=True)
            args = [_unescape(a) for a in _ARG.findall(line.split(b"] ", 1)[-1])]
            if len(args) >= 3 and args[0].lower() in (b"lpush", b"rpush") and args[1].split(b"\x06")[0] in queues:
                for raw in args[2:]:
                    message = json.loads(raw)
                    body = message["body"]
                    if message["properties"].get("body_encoding") == "base64":
                        body = base64.b64decode(body).decode()
                    self.messages.append({"headers": message["headers"], "body": json.loads(body)})

    def stop(self) -> list[dict]:
        self.halt.set()
        self.join(10)
        self.connection.disconnect()
        return self.messages


def test_tasks_carry_ids_and_no_log_holds_what_the_user_said(stack, client, runtime, uid):
    user, session = f"u{uid}", f"s{uid}"
    markers = ["翡翠龙", "Zorblaxqu", "量子羽毛球", "zorbcrafting", "琥珀星舰", "Quillonix"]
    watcher = Published(stack.settings.redis_url)
    watcher.start()
    try:
        texts = [f"我叫{markers[0]}", f"My name is {markers[1]}", f"我喜欢{markers[2]}",
                 f"I love {markers[3]} and 我想学会{markers[2]}", f"我讨厌{markers[4]}"]
        jobs = [client.remember(user_id=user, session_id=session, message_id=f"m{i}", role="user",
                                content=text).job_id for i, text in enumerate(texts)]
        assert all(j.state == "done" for j in client.wait(jobs))
        assert {b.object for b in client.profile(user).beliefs} & {markers[0], markers[1], markers[2]}
        assert client.recall(user_id=user, query=f"{markers[3]} 是什么 {markers[5]}").events
        put = httpx.put(f"{stack.api_url}/v1/users/{user}/beliefs", json={"relation": "likes", "object": markers[5]})
        assert put.status_code == 200, put.text
        client.rollback(session)  # 撤回上一条: memory.retract is queued for what long-term memory made of it
        deadline = time.monotonic() + 60
        while client.job(jobs[-1]).state != "retracted":
            assert time.monotonic() < deadline, "the undone message's job was not retracted"
            time.sleep(0.1)
        wait_until(lambda: any(m["headers"]["task"] == "memory.retract" for m in watcher.messages), 10,
                   "the retraction's task message read")  # the watcher thread may lag behind Redis
    finally:
        published = watcher.stop()
    tasks = {m["headers"]["task"] for m in published if any(j in json.dumps(m) for j in [*jobs, user])}
    assert {"memory.extract", "memory.embed", "memory.upsert_graph", "memory.retract"} <= tasks, tasks
    for message in published:
        shown = json.dumps(message, ensure_ascii=False)
        assert not [m for m in markers if m in shown], f"{message['headers']['task']} carries the user's words"
        kwargs = message["body"][1]
        if message["headers"]["task"] in ("memory.extract", "memory.llm_extract", "memory.embed",
                                          "memory.upsert_graph"):
            assert set(kwargs) <= {"job_id", "attempt"} or set(kwargs) == {"job_ids", "request_ids"}, kwargs
    logs = {p.name: p.read_text("utf-8", errors="replace") for p in stack.logs.glob("*.log")}
    assert logs and not {name: m for name, text in logs.items() for m in markers if m in text}
