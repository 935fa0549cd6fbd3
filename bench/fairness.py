"""One caller flooding the pipeline, another arriving after it: how long the second waits.

A posts ``flood`` messages as fast as the API takes them; then B posts ``few``. The figure is B's time from
its first POST until every one of its jobs is done, beside A's (from A's first POST); the raw baseline is
B's time on the same stack with no flood in front of it, measured first. A and B are users of the stack's
one tenant (auth off): today the pipeline serves its queues first in, first out, with no share per tenant
or user, so a second tenant would wait the same — the baseline for issue 16's tenant-fair work."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from memory.mneme import Mneme
from workers.local.stack import Stack, free_port


def bench_fairness(tmp: Path, flood: int = 5000, few: int = 50) -> dict:
    from bench.bench import _enqueue_all, _message_body, _wait_finished, corpus

    stack = Stack(tmp, api_port=free_port(), flower_port=free_port(), beat=False, flower=False,
                  env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false"})
    stack.start()
    try:
        jobs = Mneme(stack.settings).state.jobs
        texts, ts = corpus(), time.time() - 86400

        def bodies(tenant_user: str, n: int, offset: int) -> list[dict]:
            out = []
            for i in range(n):
                role, text = texts[(offset + i) % len(texts)]
                body = _message_body(offset + i, f"{text} #{offset + i}", role, 10, 25, ts + offset + i)
                out.append(body | {"user_id": f"{tenant_user}-{body['user_id']}",
                                   "session_id": f"{tenant_user}-{body['session_id']}"})
            return out

        def timed(batch: list[dict]) -> tuple[list[str], float]:
            started = time.perf_counter()
            return asyncio.run(_enqueue_all(stack.api_port, batch, 8)), started

        alone_ids, started = timed(bodies("b0", few, 0))
        _wait_finished(jobs, alone_ids, started, 0.05)
        alone_s = time.perf_counter() - started

        a_started = time.perf_counter()
        a_ids = asyncio.run(_enqueue_all(stack.api_port, bodies("a", flood, 10_000), 16))
        b_ids, b_started = timed(bodies("b", few, 20_000))
        _wait_finished(jobs, b_ids, b_started, 0.05)
        b_s = time.perf_counter() - b_started
        _wait_finished(jobs, a_ids, a_started, 0.2)
        a_s = time.perf_counter() - a_started
        return {"flood": flood, "few": few, "b_alone_s": alone_s, "b_behind_flood_s": b_s, "a_flood_s": a_s,
                "b_wait_ratio": b_s / alone_s}
    finally:
        stack.stop()
