"""The maintenance service, run by beat one user at a time: cold archival, noise down-weighting, compaction.

It is the one owner of the cold archive port (``memory.archive``) — the ``archive_objects`` store of
``memory.userdata`` — and works the episodic store the episodic service shares with it. Each job takes
``dry_run``, ``limit`` (users) and ``batch_size`` (users per page), reports what it did, and is safe to run
twice or concurrently: archiving merges into per-day objects before deleting from the hot store, noise
weights are recomputed from scratch, compaction uses the same eviction value as ``add``.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from memory.archive import ColdStore, archive_day, decode, encode, user_prefix
from memory.episodic import ALL_STATUSES, AddReport, EpisodicStore, overflow
from memory.models import EventType
from memory.progress import Tick
from memory.purposes import ANY, Grants
from memory.services.episodic import EpisodicMemory
from memory.settings import Settings

ARCHIVED_TYPES = frozenset({EventType.greeting, EventType.small_talk})
#: What repetition makes noise: chatter, moods, failures. Not what a user says to be remembered — statements,
#: questions, plans, requests, facts about them — which an active user says many times a week.
NOISE_TYPES = frozenset({EventType.greeting, EventType.small_talk, EventType.feedback, EventType.emotion,
                         EventType.operation_failure})


class Report(BaseModel):
    users: int = 0
    events: int = 0
    objects: int = 0
    dry_run: bool = False
    layer: AddReport = Field(default_factory=AddReport, exclude=True)  # what compaction moved out of the live layer


Job = Callable[[str, str, Report, float], None]


class Maintenance:
    name = "archive_objects"

    def __init__(self, store: EpisodicStore, episodic: EpisodicMemory, archive: ColdStore,
                 settings: Settings) -> None:
        self._store = store
        self._episodic = episodic
        self.archive = archive
        self._settings = settings

    def each_user(self, limit: int, batch_size: int) -> Iterator[tuple[str, str]]:
        after, seen = ("", ""), 0
        while seen < limit:
            page = self._store.users(after, min(batch_size, limit - seen))
            if not page:
                return
            for pair in page:
                seen += 1
                yield pair
            after = page[-1]

    def run(self, job: Job, *, dry_run: bool = False, limit: int = 100_000, batch_size: int = 500,
            tick: Tick | None = None) -> Report:
        """``job`` (``archive_user``, ``downweight_noise``, ``compact_user``) for every user with events (listed
        first, so ``tick(done, total)`` knows the total)."""
        report, now = Report(dry_run=dry_run), time.time()
        users = list(self.each_user(limit, batch_size))
        for tenant, user_id in users:
            report.users += 1
            job(tenant, user_id, report, now)
            if tick:
                tick(report.users, len(users))
        return report

    # --- cold archive ---------------------------------------------------------------------------------
    def archive_user(self, tenant: str, user_id: str, report: Report, now: float) -> None:
        """Greetings and small talk older than ``archive_after_days`` → gzip JSON lines per user and day in
        the cold store, then out of the hot store (and so out of recall)."""
        cutoff = now - self._settings.archive_after_days * 86400
        old = self._store.dump(tenant, user_id, types=ARCHIVED_TYPES, before_ts=cutoff, statuses=ALL_STATUSES)
        by_day: dict[str, list[dict[str, Any]]] = {}
        for event, vector in old:
            day = datetime.fromtimestamp(event.ts, UTC).strftime("%Y-%m-%d")
            by_day.setdefault(day, []).append(self._episodic.archived(event, vector))
        report.events += len(old)
        report.objects += len(by_day)
        if report.dry_run or not old:
            return
        for day, records in by_day.items():
            archive_day(self.archive, tenant, user_id, day, records)
        self._store.delete(tenant, user_id, [e.event_id for e, _ in old])  # only once safely archived

    def restore_user(self, tenant: str, user_id: str) -> int:
        """Put a user's archived events back into the hot store (the objects stay: archiving is idempotent)."""
        restored = 0
        for name in self.archive.list(user_prefix(tenant, user_id)):
            pairs = [p for r in decode(self.archive.get(name)) if (p := self._episodic.unarchived(tenant, user_id, r))]
            if pairs:
                report = self._store.add([e for e, _ in pairs], np.stack([v for _, v in pairs]),
                                         merge_threshold=2.0, cap=10**9)
                restored += len(report.inserted)
        return restored

    def strip_archive(self, tenant: str, user_id: str, sealed: Callable[[str], bytes], lang: str) -> int:
        """A user's archived events made type only (child mode), object by object: ``sealed`` gives an
        event's empty payload, the vector is zeroed, the index tokens dropped."""
        stripped = 0
        for name in self.archive.list(user_prefix(tenant, user_id)):
            records = decode(self.archive.get(name))
            for r in records:
                zeros = bytes(len(base64.b64decode(r["vector"])))
                r.update(sealed=base64.b64encode(sealed(r["event_id"])).decode(), tokens=[], lang=lang,
                         vector=base64.b64encode(zeros).decode())
            self.archive.put(name, encode(records))
            stripped += len(records)
        return stripped

    def forget_unserved(self, tenant: str, user_id: str, consent: Grants) -> int:
        """A user's archived events that serve none of the purposes ``consent`` grants leave their objects (an
        object left empty goes); how many left. Idempotent."""
        gone = 0
        for name in self.archive.list(user_prefix(tenant, user_id)):
            records = decode(self.archive.get(name))
            kept = [r for r in records if consent.serves(r.get("purposes") or [ANY])]
            if len(kept) == len(records):
                continue
            gone += len(records) - len(kept)
            if kept:
                self.archive.put(name, encode(kept))
            else:
                self.archive.delete_prefix(name)
        return gone

    # --- noise ------------------------------------------------------------------------------------------
    def downweight_noise(self, tenant: str, user_id: str, report: Report, now: float) -> None:
        """The same event type of ``NOISE_TYPES`` ``noise_threshold``+ times within ``noise_window_days`` weighs
        ``noise_weight`` in recall; everything else weighs 1. Recomputed from scratch every run."""
        s = self._settings
        window = now - s.noise_window_days * 86400
        live = [e for e, _ in self._store.dump(tenant, user_id)]
        recent: Counter[EventType] = Counter()
        for e in live:
            if e.ts >= window:
                recent[e.event_type] += e.count
        noisy = {t for t, n in recent.items() if n >= s.noise_threshold and t in NOISE_TYPES}
        want = {e.event_id: (s.noise_weight if e.event_type in noisy and e.ts >= window else 1.0) for e in live}
        changes: dict[float, list[str]] = {}
        for e in live:
            if abs(e.noise - want[e.event_id]) > 1e-9:
                changes.setdefault(want[e.event_id], []).append(e.event_id)
        report.events += sum(len(v) for v in changes.values())
        if not report.dry_run:
            for noise, event_ids in changes.items():
                self._store.update(tenant, user_id, event_ids, noise=noise)

    # --- compaction -------------------------------------------------------------------------------------
    def compact_user(self, tenant: str, user_id: str, report: Report, now: float) -> None:
        """Hold every user to ``events_cap`` live events (e.g. after the cap was lowered) the way ``add``
        does: a user over it is taken down to ``cap_floor``, consolidated or moved to the deep tier, never
        deleted; evictions are reported for the audit."""
        s = self._settings
        over = overflow(self._store.live_count(tenant, user_id), s.events_cap)
        if not over:
            return
        report.events += over
        if not report.dry_run:
            done = self._store.consolidate(tenant, user_id, s.events_cap, s.consolidate_threshold)
            report.layer.evicted += done.evicted
            report.layer.consolidated += done.consolidated

    # --- user data (``memory.userdata``) ----------------------------------------------------------------
    def count(self, tenant: str, user_id: str) -> int:
        return len(self.archive.list(user_prefix(tenant, user_id)))

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        events = []
        for name in self.archive.list(user_prefix(tenant, user_id)):
            for record in decode(self.archive.get(name)):
                if back := self._episodic.unarchived(tenant, user_id, record):
                    events.append(self._episodic.exported(back[0].model_copy(update={"status": "archived"})))
        return events

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: self.archive.delete_prefix(user_prefix(tenant, user_id))}

    def ping(self) -> None:
        self.archive.ping()

