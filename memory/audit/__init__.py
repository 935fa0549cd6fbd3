"""The audit sink port, the record builders, and the adapters chosen by URL (``memory.registry``):

    file:///abs/path.jsonl                  FileAuditLog            append-only, hash-chained JSON lines
    elasticsearch[s]://host:9200/prefix     ElasticsearchAuditSink  daily indices ``prefix-YYYY.MM.DD``

Every record carries at least ``id, ts, tenant, user, operator_id, source, action`` (``user`` is a keyed hash
of tenant and user id, ``memory.userhash``, never the id itself) plus optional fields such as
``confidence_before/after``. The same event always gets the same ``id``, so a sink can recognise a re-sent
record. ``mneme audit verify [PATH]`` (``workers.cli.audit``) checks a file's hash chain.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from memory.audit.file import FileAuditLog, VerifyReport, verify
from memory.episodic import AddReport, Consolidated, Evicted
from memory.errors import InvalidInput
from memory.graph import Change
from memory.userhash import user_hash

__all__ = ["AuditSink", "FileAuditLog", "VerifyReport", "eviction_record", "graph_write_record", "record", "verify"]

REQUIRED_FIELDS = ("id", "ts", "tenant", "user", "operator_id", "source", "action")
RESERVED_FIELDS = ("prev", "hash")  # the file sink's chain fields


class AuditSink(Protocol):
    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Store the records, in order; re-sending a record already stored must do no harm."""
        ...

    def ping(self) -> None:
        """Raise if the sink cannot take writes now."""
        ...


def record(key: bytes, tenant: str, user_id: str, action: str, record_id: str, operator_id: str, source: str,
           **fields: object) -> dict[str, Any]:
    """One audit record; the same event always gets the same ``id``, so a re-sent record is recognisable.
    ``key`` hashes the user (``Mneme.user_hash_key``)."""
    clash = [name for name in (*REQUIRED_FIELDS, *RESERVED_FIELDS) if name in fields]
    if clash:
        raise InvalidInput(f"audit record fields {clash} are reserved")
    return {
        "id": record_id,
        "ts": time.time(),
        "tenant": tenant,
        "user": user_hash(key, tenant, user_id),
        "operator_id": operator_id,
        "action": action,
        "source": source,
        **fields,
    }


def graph_write_record(key: bytes, change: Change, operator_id: str) -> dict[str, Any]:
    return record(key, change.tenant, change.user_id, f"graph.{change.action}", change.record_id, operator_id,
                  change.source.value, relation=change.relation, rel_id=change.rel_id,
                  evidence_id=change.evidence_id, confidence_before=change.before, confidence_after=change.after)


def layer_records(key: bytes, report: AddReport) -> list[dict[str, Any]]:
    """Audit records of what left the live event layer: moved to the deep tier, or consolidated."""
    return ([eviction_record(key, e) for e in report.evicted]
            + [consolidation_record(key, c) for c in report.consolidated])


def consolidation_record(key: bytes, merged: Consolidated) -> dict[str, Any]:
    return record(key, merged.tenant, merged.user_id, "episodic.consolidate", f"consolidate:{merged.event_id}",
                  "pipeline", "cap", event_id=merged.event_id, into=merged.into)


def eviction_record(key: bytes, evicted: Evicted) -> dict[str, Any]:
    return record(key, evicted.tenant, evicted.user_id, "episodic.evict", f"evict:{evicted.event_id}", "pipeline",
                  "cap", event_id=evicted.event_id, event_type=evicted.event_type.value)
