"""The enqueue API under an open-loop load: POST /v1/messages latency with the pipeline running and with the
workers stopped, beside raw ASGI baselines under the same uvicorn and load measured in the same rounds
(``api`` of ``bench.bench``)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Iterable

import redis

from bench.load import (
    Conn,
    corpus,
    cpu_ms_each,
    cpu_seconds,
    message_body,
    pct,
    steal_seconds,
)
from bench.raw_asgi import serve
from workers.local.stack import Stack

REDIS_STALL_MS = 2  # Redis's latency monitor notes what took at least this long


async def _open_loop(port: int, rate: float, seconds: float, body: Callable[[int], bytes],
                     connections: int) -> dict:
    """Request i is due at t0 + i/rate whatever happened before (open loop), and is sent on a free
    keep-alive connection (at most ``connections`` in flight: bounded). Latency is measured from the due
    time, so time spent waiting for a free connection counts (no coordinated omission). The generator's own
    garbage collector is off while it runs: its pauses (~35 ms) would be counted as the server's latency."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return await _open_loop_run(port, rate, seconds, body, connections)
    finally:
        gc.enable()
        gc.unfreeze()


async def _open_loop_run(port: int, rate: float, seconds: float, body: Callable[[int], bytes],
                         connections: int) -> dict:
    idle: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(connections):
        idle.put_nowait(Conn(*await asyncio.open_connection("127.0.0.1", port)))
    host = f"127.0.0.1:{port}"
    latencies: list[float] = []
    service: list[float] = []
    statuses: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    total = int(rate * seconds)

    async def one(i: int, due: float) -> None:
        conn = await idle.get()
        sent = loop.time()
        try:
            status, _ = await conn.post(host, "/v1/messages", body(i))
        finally:
            idle.put_nowait(conn)
        done = loop.time()
        statuses[status] = statuses.get(status, 0) + 1
        latencies.append(done - due)
        service.append(done - sent)

    tasks = []
    t0 = loop.time() + 0.05
    lag = 0.0
    for i in range(total):
        due = t0 + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = max(lag, -delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    elapsed = loop.time() - t0
    while not idle.empty():
        idle.get_nowait().writer.close()
    return {
        "requests": total, "target_rate": rate, "achieved_rate": total / elapsed, "statuses": statuses,
        "p50_ms": pct(latencies, 0.5), "p99_ms": pct(latencies, 0.99), "max_ms": max(latencies) * 1000,
        "service_p99_ms": pct(service, 0.99), "generator_max_lag_ms": lag * 1000, "connections": connections,
    }


def _raw_api(rate: float, seconds: float, workers: int, body: Callable[[int], bytes], app: str = "app",
             redis_url: str = "") -> dict:
    """The same load on ``bench.raw_asgi``'s ``app`` under the same uvicorn (a raw baseline)."""
    with serve(app, redis_url, workers) as (port, _):
        asyncio.run(_open_loop(port, 100, 1.0, body, 32))  # warm up
        out = asyncio.run(_open_loop(port, rate, seconds, body, 64))
    return {k: out[k] for k in ("p50_ms", "p99_ms", "service_p99_ms", "achieved_rate")}


def bench_api(stack: Stack, rate: float, seconds: float, rounds: int = 3) -> dict:
    """``rounds`` rounds, each the raw baselines, then Mneme with the pipeline running at full speed (the
    workers draining what the rounds before left), then with the workers and beat stopped. A figure is the
    median of its rounds' (each round's are kept): on this shared 2-CPU box one 10-s window's p99 moved 4 →
    46 ms with the same code, its raw floor with it, and three interleaved rounds say more than one."""
    texts = corpus()
    ts = time.time()
    run = random.randrange(10**9)

    def body(i: int) -> bytes:
        role, text = texts[i % len(texts)]
        return json.dumps(message_body(i, text, role, 200, 25, ts) | {"message_id": f"load{run}-{i}"},
                          ensure_ascii=False).encode()

    asyncio.run(_open_loop(stack.api_port, 100, 1.0, lambda i: body(10**6 + i), 32))  # warm up
    light = asyncio.run(_open_loop(stack.api_port, 50, 3.0, lambda i: body(2 * 10**6 + i), 16))
    stopped = [n for n in stack.procs if n.startswith("worker-") or n == "beat"]
    watch = redis.Redis.from_url(stack.settings.redis_url)  # the stack's own Redis: its stalls beside the p99
    watch.config_set("latency-monitor-threshold", REDIS_STALL_MS)

    def load(first: int) -> dict:
        watch.execute_command("LATENCY", "RESET")
        stolen = steal_seconds()
        out = asyncio.run(_open_loop(stack.api_port, rate, seconds, lambda i: body(first + i), 64))
        out["redis_stalls_ms"] = _redis_stalls(watch)
        out["steal_ms"] = round((steal_seconds() - stolen) * 1000)  # what the host took for other guests
        return out

    each = []
    try:
        for k in range(rounds):
            first = (3 + 2 * k) * 10**6  # each round's messages are new ones
            raw = _raw_api(rate, seconds, stack.api_workers, body)
            raw_redis = _raw_api(rate, seconds, stack.api_workers, body, "redis_app", stack.settings.redis_url)
            if k:  # the workers stopped by the round before: they start on its backlog
                for name in stopped:
                    stack.start_one(name)
                stack.wait_ready()
            cpu_before, load_before = cpu_seconds(stack), os.getloadavg()[0]
            running = load(first)
            running["cpu_ms_per_request"] = cpu_ms_each(cpu_before, cpu_seconds(stack), running["requests"], 3)
            running["loadavg_1min_before_after"] = [load_before, os.getloadavg()[0]]
            # the same load with the Celery workers and beat stopped: what the API does when it has the CPUs
            for name in stopped:
                stack.stop_one(name)
            alone = load(first + 10**6)
            each.append({"running": running, "workers_stopped": alone, "raw_asgi": raw, "raw_asgi_redis": raw_redis})
    finally:
        watch.close()
    out = _median_of(each, "running", ("p50_ms", "p99_ms", "max_ms", "service_p99_ms", "achieved_rate",
                                       "generator_max_lag_ms"))
    out |= {"requests": sum(r["running"]["requests"] for r in each), "target_rate": rate, "connections": 64,
            "statuses": _statuses(r["running"] for r in each), "rounds": each, "seconds_a_round": seconds,
            "api_workers": stack.api_workers, "worker_nice": stack.settings.worker_nice,
            "cpu_ms_per_request": {name: statistics.median(r["running"]["cpu_ms_per_request"].get(name, 0)
                                                          for r in each)
                                   for name in each[0]["running"]["cpu_ms_per_request"]},
            "at_50_per_s": {k: light[k] for k in ("p50_ms", "p99_ms", "statuses")}}
    out["workers_stopped"] = _median_of(each, "workers_stopped", ("p50_ms", "p99_ms", "service_p99_ms",
                                                                  "achieved_rate", "generator_max_lag_ms"))
    out["workers_stopped"]["statuses"] = _statuses(r["workers_stopped"] for r in each)
    for baseline in ("raw_asgi", "raw_asgi_redis"):
        out[baseline] = _median_of(each, baseline, ("p50_ms", "p99_ms", "service_p99_ms", "achieved_rate"))
    out["generator"] = ("open loop: request i is due at t0 + i/rate and goes out on a free keep-alive connection "
                        "(at most 64 in flight); latency from the due time to the last response byte; "
                        "minimal HTTP/1.1 client on asyncio streams")
    return out


def _redis_stalls(client: redis.Redis) -> dict[str, int]:
    """Redis's latency monitor since its last reset: each kind of stall's peak in ms (``aof-write``: writing the
    append-only file; ``command``, ``fast-command``: a command running that long; ``fork``; …)."""
    return {(event.decode() if isinstance(event, bytes) else event): int(peak)  # the 4th field: the peak
            for event, _, _, peak, *_ in client.execute_command("LATENCY", "LATEST")}


def _median_of(rounds: list[dict], part: str, figures: tuple[str, ...]) -> dict:
    return {f: statistics.median(r[part][f] for r in rounds) for f in figures}


def _statuses(parts: Iterable[dict]) -> dict[int, int]:
    total: dict[int, int] = {}
    for part in parts:
        for status, n in part["statuses"].items():
            total[status] = total.get(status, 0) + n
    return total
