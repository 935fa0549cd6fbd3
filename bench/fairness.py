"""One tenant flooding the pipeline, another arriving after it: how long the second waits.

Tenant A posts ``flood`` messages as fast as the API takes them; then tenant B posts ``few``. The figure is B's
time from its first POST until every one of its jobs is done, beside A's (from A's first POST); the raw
baseline is B's time on the same stack with no flood in front of it, measured first. The same run on a stack
with one line for all tenants (``MNEME_TENANT_WINDOW=0``: first in, first out, as before tenant-fair work)
shows what the tenants' lines (``memory.state.fairness``) change."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from pathlib import Path

from memory.mneme import Mneme
from workers.local.stack import Stack, free_port


def bench_fairness(tmp: Path, flood: int = 5000, few: int = 50) -> dict:
    fair = _run(tmp / "fair", flood, few, {})
    fifo = _run(tmp / "fifo", flood, few, {"MNEME_TENANT_WINDOW": "0"})
    return {"flood": flood, "few": few, **fair, "b_wait_ratio": fair["b_behind_flood_s"] / fair["b_alone_s"],
            "fifo": fifo}


def _run(tmp: Path, flood: int, few: int, env: dict[str, str]) -> dict:
    from bench.load import corpus, enqueue_all, message_body, wait_finished

    stack = Stack(tmp, api_port=free_port(), flower_port=free_port(), beat=False, flower=False,
                  env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false", "MNEME_AUTH_REQUIRED": "true",
                       "MNEME_MASTER_KEY": base64.b64encode(os.urandom(32)).decode(), **env})
    stack.start()
    try:
        mneme = Mneme(stack.settings)
        jobs, texts, ts = mneme.state.jobs, corpus(), time.time() - 86400
        key = {t: mneme.state.api_keys.create_key(t, name=f"bench {t}", rate_limit=0)[1] for t in ("a", "b")}

        def bodies(n: int, offset: int) -> list[dict]:
            out = []
            for i in range(n):
                role, text = texts[(offset + i) % len(texts)]
                out.append(message_body(offset + i, f"{text} #{offset + i}", role, 10, 25, ts + offset + i))
            return out

        def post(tenant: str, batch: list[dict], connections: int) -> tuple[list[str], float]:
            started = time.perf_counter()
            return asyncio.run(enqueue_all(stack.api_port, batch, connections, key[tenant])), started

        alone_ids, started = post("b", bodies(few, 0), 8)
        wait_finished(jobs, alone_ids, started, 0.05)
        alone_s = time.perf_counter() - started

        a_ids, a_started = post("a", bodies(flood, 10_000), 16)
        b_ids, b_started = post("b", bodies(few, 20_000), 8)
        wait_finished(jobs, b_ids, b_started, 0.05)
        b_s = time.perf_counter() - b_started
        a_left = len(jobs.unfinished(a_ids))
        wait_finished(jobs, a_ids, a_started, 0.2)
        return {"b_alone_s": alone_s, "b_behind_flood_s": b_s, "a_flood_s": time.perf_counter() - a_started,
                "a_left_when_b_done": a_left, "window": mneme.settings.tenant_window}
    finally:
        stack.stop()
