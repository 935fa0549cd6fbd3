"""End to end's raw pipeline: what a pipeline that does nothing but embed reaches on this box, in the e2e
section's run beside Mneme's end to end — so the gap to the raw embedder splits into what any pipeline here
costs (HTTP, Redis, a queue, the CPUs the client and the model share) and what Mneme's own work a message costs.

``bench.raw_asgi``'s ``redis_app`` under the uvicorn Mneme's API runs on (one Redis pipeline a POST: the
message in its session's list, its job, a task pushed) and one process (``python -m bench.raw_pipeline``,
``consume``) taking the tasks as they come, up to four batches at a time, embedding their texts as the embed
stage does (the same embedder, one BLAS thread, its batch size) and writing each job's vector and state, one
Redis pipeline a batch. No working-memory versions, extraction, graph, events, sealing, job records or audit.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import redis

from bench.load import as_embedded, send_all
from bench.raw_asgi import PENDING, TASKS, serve
from workers.local.stack import Stack, lower_priority

DONE = "raw:done"  # how many messages the consumer embedded


def consume(redis_url: str, batch: int) -> None:
    """Embed what ``redis_app`` accepts, until killed; "ready" on stdout once the model is loaded."""
    from memory.embedding import USEEmbedder

    client, embedder = redis.Redis.from_url(redis_url), USEEmbedder(threads=1)
    embedder.embed(["ready"])
    print("ready", flush=True)
    while True:
        first = client.brpop([TASKS], timeout=1)
        if not first:
            continue
        jobs = [first[1], *(client.rpop(TASKS, 4 * batch - 1) or [])]
        pipe = client.pipeline(transaction=False)
        for job in jobs:
            pipe.hget(job, "payload")
        texts = [as_embedded(json.loads(payload)["content"]) for payload in pipe.execute()]
        for i in range(0, len(jobs), batch):
            vectors = embedder.embed(texts[i:i + batch])
            pipe = client.pipeline(transaction=False)
            for job, vector in zip(jobs[i:i + batch], vectors, strict=True):
                pipe.hset(job, mapping={"state": "done", "vector": vector.astype("float16").tobytes()})
                pipe.zrem(PENDING, job)
            pipe.incrby(DONE, len(vectors))
            pipe.execute()


def bench_raw_pipeline(stack: Stack, bodies: list[dict], batch: int) -> dict:
    """``bodies`` POSTed as Mneme's end to end POSTs them (16 keep-alive connections, the same client) to the
    raw pipeline on the stack's Redis (keys ``raw:*``, deleted before and after); messages/s until every one is embedded
    and the CPU its processes spent a message (the consumer at the stack's workers' priority)."""
    url = stack.settings.redis_url
    client = redis.Redis.from_url(url)
    _clear(client)  # the API section's raw baseline pushes tasks nobody takes
    consumer = subprocess.Popen([sys.executable, "-m", "bench.raw_pipeline", url, str(batch)],
                                cwd=Path(__file__).parent.parent, stdout=subprocess.PIPE, text=True,
                                start_new_session=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    try:
        if stack.settings.worker_nice:
            lower_priority(consumer.pid, stack.settings.worker_nice)
        if consumer.stdout is None or consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the raw pipeline's consumer did not start")
        with serve("redis_app", url) as (port, server):
            processes = {"api": psutil.Process(server), "consumer": psutil.Process(consumer.pid)}
            if "redis" in stack.procs:  # the stack's own Valkey (not a Redis it was pointed at)
                processes["redis"] = psutil.Process(stack.procs["redis"].pid)
            before = {name: sum(p.cpu_times()[:2]) for name, p in processes.items()}
            started = time.perf_counter()
            asyncio.run(send_all(port, "/v1/messages", [json.dumps(b).encode() for b in bodies], 16, lambda _: None))
            while int(client.get(DONE) or 0) < len(bodies):
                if consumer.poll() is not None or time.perf_counter() - started > 600:
                    raise RuntimeError("the raw pipeline's consumer died or did not embed every message in 600 s")
                time.sleep(0.1)
            seconds = time.perf_counter() - started
            spent = {name: round((sum(p.cpu_times()[:2]) - before[name]) / len(bodies) * 1000, 2)
                     for name, p in processes.items()}
    finally:
        consumer.kill()
        consumer.wait(20)
        _clear(client)
        client.close()
    return {"messages": len(bodies), "messages_per_s": len(bodies) / seconds,
            "cpu_ms_per_message_by_process": spent, "cpu_ms_per_message": round(sum(spent.values()), 2)}


def _clear(client: redis.Redis) -> None:
    """Every ``raw:*`` key of the raw baselines."""
    left = list(client.scan_iter("raw:*", count=1000))
    for i in range(0, len(left), 1000):
        client.unlink(*left[i:i + 1000])


if __name__ == "__main__":
    consume(sys.argv[1], int(sys.argv[2]))
