"""Maintenance run by beat, one user at a time: cold archival, noise down-weighting, compaction.

Each job takes ``dry_run``, ``limit`` (users) and ``batch_size`` (users per page), reports what it did,
and is safe to run twice or concurrently: archiving merges into per-day objects before deleting from the
hot store, noise weights are recomputed from scratch, compaction uses the same eviction value as ``add``.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
from pydantic import BaseModel, Field

from memory.archive import archive_day, decode, user_prefix
from memory.episodic import ALL_STATUSES, AddReport, StoredEvent
from memory.models import EventType
from memory.runtime import Runtime

ARCHIVED_TYPES = frozenset({EventType.greeting, EventType.small_talk})


class Report(BaseModel):
    users: int = 0
    events: int = 0
    objects: int = 0
    dry_run: bool = False
    layer: AddReport = Field(default_factory=AddReport, exclude=True)  # what compaction moved out of the live layer


def each_user(rt: Runtime, limit: int, batch_size: int) -> Iterator[tuple[str, str]]:
    after, seen = ("", ""), 0
    while seen < limit:
        page = rt.episodic_store.users(after, min(batch_size, limit - seen))
        if not page:
            return
        for pair in page:
            seen += 1
            yield pair
        after = page[-1]


def run(rt: Runtime, job: Callable[[Runtime, str, str, Report, float], None], *, dry_run: bool = False,
        limit: int = 100_000, batch_size: int = 500) -> Report:
    report, now = Report(dry_run=dry_run), time.time()
    for tenant, user_id in each_user(rt, limit, batch_size):
        report.users += 1
        job(rt, tenant, user_id, report, now)
    return report


# --- cold archive ---------------------------------------------------------------------------------

def archive_user(rt: Runtime, tenant: str, user_id: str, report: Report, now: float) -> None:
    """Greetings and small talk older than ``archive_after_days`` → gzip JSON lines per user and day in the
    cold store, then out of the hot store (and so out of recall)."""
    cutoff = now - rt.settings.archive_after_days * 86400
    old = rt.episodic_store.dump(tenant, user_id, types=ARCHIVED_TYPES, before_ts=cutoff,
                                 statuses=ALL_STATUSES)
    by_day: dict[str, list[dict]] = {}
    for event, vector in old:
        day = datetime.fromtimestamp(event.ts, UTC).strftime("%Y-%m-%d")
        by_day.setdefault(day, []).append(to_record(event, vector))
    report.events += len(old)
    report.objects += len(by_day)
    if report.dry_run or not old:
        return
    for day, records in by_day.items():
        archive_day(rt.archive, tenant, user_id, day, records)
    rt.episodic_store.delete(tenant, user_id, [e.event_id for e, _ in old])  # only once safely archived


def restore_user(rt: Runtime, tenant: str, user_id: str) -> int:
    """Put a user's archived events back into the hot store (the objects stay: archiving is idempotent)."""
    restored = 0
    for name in rt.archive.list(user_prefix(tenant, user_id)):
        pairs = [from_record(r) for r in decode(rt.archive.get(name))]
        if pairs:
            report = rt.episodic_store.add([e for e, _ in pairs], np.stack([v for _, v in pairs]),
                                           merge_threshold=2.0, cap=10**9)
            restored += len(report.inserted)
    return restored


def to_record(event: StoredEvent, vector: np.ndarray) -> dict:
    record = event.model_dump(mode="json", exclude={"sealed"})
    record["sealed"] = base64.b64encode(event.sealed).decode()
    record["vector"] = base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()
    return record


def from_record(record: dict) -> tuple[StoredEvent, np.ndarray]:
    vector = np.frombuffer(base64.b64decode(record.pop("vector")), dtype=np.float32)
    record["sealed"] = base64.b64decode(record["sealed"])
    return StoredEvent(**{**record, "status": "live"}), vector


# --- noise ------------------------------------------------------------------------------------------

def downweight_noise(rt: Runtime, tenant: str, user_id: str, report: Report, now: float) -> None:
    """The same event type ``noise_threshold``+ times within ``noise_window_days`` weighs
    ``noise_weight`` in recall; everything else weighs 1. Recomputed from scratch every run."""
    s = rt.settings
    window = now - s.noise_window_days * 86400
    live = [e for e, _ in rt.episodic_store.dump(tenant, user_id)]
    recent = Counter()
    for e in live:
        if e.ts >= window:
            recent[e.event_type] += e.count
    noisy = {t for t, n in recent.items() if n >= s.noise_threshold}
    want = {e.event_id: (s.noise_weight if e.event_type in noisy and e.ts >= window else 1.0) for e in live}
    changes: dict[float, list[str]] = {}
    for e in live:
        if abs(e.noise - want[e.event_id]) > 1e-9:
            changes.setdefault(want[e.event_id], []).append(e.event_id)
    report.events += sum(len(v) for v in changes.values())
    if not report.dry_run:
        for noise, event_ids in changes.items():
            rt.episodic_store.update(tenant, user_id, event_ids, noise=noise)


# --- compaction -------------------------------------------------------------------------------------

def compact_user(rt: Runtime, tenant: str, user_id: str, report: Report, now: float) -> None:
    """Hold every user to ``events_cap`` live events (e.g. after the cap was lowered) the way ``add`` does:
    consolidated or moved to the deep tier, never deleted; evictions are reported for the audit trail."""
    over = rt.episodic_store.live_count(tenant, user_id) - rt.settings.events_cap
    if over <= 0:
        return
    report.events += over
    if not report.dry_run:
        done = rt.episodic_store.consolidate(tenant, user_id, rt.settings.events_cap,
                                             rt.settings.consolidate_threshold)
        report.layer.evicted += done.evicted
        report.layer.consolidated += done.consolidated
