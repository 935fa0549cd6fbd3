"""Is each pipeline stage making progress? Workers note when a task of a stage (named as its queue)
finishes; ``/healthz`` reports a stage whose queue holds work while nothing of it has finished for
``stage_stall_after_s``
(a worker that keeps dying, a model that never loads) instead of saying ok while the queue grows."""

from __future__ import annotations

import time
from collections.abc import Mapping

import redis

from memory.state import keys

NOTE_EVERY_S = 1.0  # a worker writes its progress at most this often per queue


class StageProgress:
    """When each stage last finished a task."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._noted: dict[str, float] = {}  # queue → when this process last wrote its progress
        self._waiting: dict[str, float] = {}  # queue → since when this process has seen it hold work

    def note_progress(self, queue: str, now: float | None = None) -> None:
        """A task of ``queue`` finished (called by workers after each task; cheap: one write a second)."""
        now = time.time() if now is None else now
        if now - self._noted.get(queue, 0.0) < NOTE_EVERY_S:
            return
        self._noted[queue] = now
        self._redis.hset(keys.STAGE_PROGRESS, queue, now)

    def stalled(self, depths: Mapping[str, int], stall_after_s: float, now: float | None = None) -> dict[str, str]:
        """Stages whose queue has held tasks (``depths``: queue → messages waiting, ``Broker.depths``) every
        time this process asked, for more than ``stall_after_s``, and that finished none in that time: queue
        → what is wrong. (A task that waits a moment on a stage that never ran before is not a stall.)"""
        now = time.time() if now is None else now
        progress = self._redis.hgetall(keys.STAGE_PROGRESS)
        out = {}
        for queue, depth in depths.items():
            if not depth:
                self._waiting.pop(queue, None)
                continue
            last = max(float(progress.get(queue, 0.0)), self._waiting.setdefault(queue, now))
            if now - last > stall_after_s:
                out[queue] = f"stalled: {depth:,} queued, none finished for {now - last:.0f} s"
        return out
