"""The audit sink port and its embedded adapter: an append-only JSON-lines file.

Records carry a hash of the user id, never the id itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from memory.episodic import Evicted
from memory.graph import Change
from memory.settings import Settings


class AuditSink(Protocol):
    def write(self, records: Sequence[dict]) -> None: ...

    def ping(self) -> None: ...


def record(tenant: str, user_id: str, action: str, record_id: str, operator_id: str, source: str,
           **fields: object) -> dict:
    """One audit record; the same event always gets the same ``id``, so a re-sent record is recognisable."""
    return {
        "id": record_id,
        "ts": time.time(),
        "tenant": tenant,
        "user": hashlib.sha256(f"{tenant}\x1f{user_id}".encode()).hexdigest()[:32],
        "operator_id": operator_id,
        "action": action,
        "source": source,
        **fields,
    }


def graph_write_record(change: Change, operator_id: str) -> dict:
    return record(change.tenant, change.user_id, f"graph.{change.action}", change.record_id, operator_id,
                  change.source.value, relation=change.relation.value, rel_id=change.rel_id,
                  evidence_id=change.evidence_id, confidence_before=change.before, confidence_after=change.after)


def eviction_record(evicted: Evicted) -> dict:
    return record(evicted.tenant, evicted.user_id, "episodic.evict", f"evict:{evicted.event_id}", "pipeline",
                  "cap", event_id=evicted.event_id, event_type=evicted.event_type.value)


class FileAuditLog:
    def __init__(self, path: Path) -> None:
        self._path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> FileAuditLog:
        return cls(Path(url.removeprefix("file://")))

    def write(self, records: Sequence[dict]) -> None:
        lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
        with self._path.open("a", encoding="utf-8") as fh:  # one locked append: writers never interleave
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(lines)
            fh.flush()

    def ping(self) -> None:
        with self._path.open("a", encoding="utf-8"):
            pass
