"""What the read audit costs a recall over HTTP: two API processes of one stack, one recording every read
(the default) and one with ``MNEME_READ_AUDIT=false`` (the raw baseline), asked the same queries in turn
(which goes first alternates), so both see the same box, the same data and the same background work —
including the pipeline worker writing the recorded reads to the trail and the read log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import httpx

from memory.mneme import Mneme
from workers.local.stack import Stack, free_port


def bench_read_audit(tmp: Path, n: int, users: int = 8, messages: int = 400) -> dict:
    from bench.load import corpus, enqueue_all, message_body, pct, queries, wait_finished

    stack = Stack(tmp, api_port=free_port(), flower_port=free_port(), beat=False, flower=False,
                  env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false"})
    stack.start()
    baseline: subprocess.Popen[bytes] | None = None
    try:
        texts, ts = corpus(), time.time() - 86400
        bodies = [message_body(i, texts[i % len(texts)][1], texts[i % len(texts)][0], users, 25, ts + i)
                  for i in range(messages)]
        mneme = Mneme(stack.settings)
        wait_finished(mneme.state.jobs, asyncio.run(enqueue_all(stack.api_port, bodies, 8)), time.perf_counter(),
                       0.1)
        off_port = free_port()
        command = [*stack.commands()["api"]]
        command[command.index("--port") + 1] = str(off_port)
        baseline = subprocess.Popen(command, env={**stack.env, "MNEME_READ_AUDIT": "false"},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        ports = {"audited": stack.api_port, "not_audited": off_port}
        _wait_warm(f"http://127.0.0.1:{off_port}")
        qs = queries()
        samples: dict[str, list[float]] = {name: [] for name in ports}
        with httpx.Client(timeout=30) as http:
            for i in range(-20, n):  # 20 rounds of warm-up each, not counted
                body = {"user_id": f"u{i % users}", "query": qs[i % len(qs)], "k": 5,
                        "session_id": f"u{i % users}-s0"}
                order = list(ports) if i % 2 else list(ports)[::-1]
                for name in order:
                    started = time.perf_counter()
                    response = http.post(f"http://127.0.0.1:{ports[name]}/v1/recall", json=body)
                    took = time.perf_counter() - started
                    if response.status_code != 200:
                        raise RuntimeError(f"recall answered {response.status_code}: {response.text[:200]}")
                    if i >= 0:
                        samples[name].append(took)
        recorded = _recorded(mneme, users, n + 20)
        out = {name: {"p50_ms": pct(s, 0.5), "p95_ms": pct(s, 0.95), "p99_ms": pct(s, 0.99)}
               for name, s in samples.items()}
        return out | {"queries": n, "users": users, "messages": messages, "reads_recorded": recorded,
                      "p95_ratio": out["audited"]["p95_ms"] / out["not_audited"]["p95_ms"]}
    finally:
        if baseline is not None:
            os.killpg(baseline.pid, 15)
            baseline.wait(20)
        stack.stop()


def _wait_warm(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).json()["backends"]["embedder"] == "ok":
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the API at {url} did not load its model in {timeout}s")


def _recorded(mneme: Mneme, users: int, expected: int, timeout: float = 60) -> int:
    """The reads the audited API recorded, once the worker has written them all (or after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        count = sum(mneme.reads.count(mneme.settings.tenant, f"u{u}") for u in range(users))
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.2)
