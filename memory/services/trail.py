"""The audit trail as services write it: every record goes through the outbox, then to the sink.

``submit`` holds the records in the outbox (``memory.state.outbox``) first, so a record is never lost
between a change and the sink: with a ``task`` (a worker's: the ``memory.audit`` message for them) it is
pushed once they are held and the records travel as that task; without one (the API's changes, the CLI)
they are written to the sink at once; ``hold`` only holds them (the API's reads: it sends them in batches).
Either way they leave the outbox only once the sink has them (``write``; read records go to the read log
too, ``memory.reads``), and the redrive task re-sends whatever is held too long — a sink that is down
delays a record, it does not lose it, nor fail the change it records.

Record ids are deterministic (``memory.audit.record``): what the change is, whom it is about, and the
state change's own identity (an erasure's time, a job id, a read's request id, or a sequence number the
tenant's counters hand out once), never the clock of the moment the record is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory.audit import AuditSink, graph_write_record, layer_records, record
from memory.episodic import AddReport
from memory.graph import Change
from memory.reads import ReadLog, is_read
from memory.state.counters import Counters
from memory.state.outbox import AuditOutbox
from memory.userhash import user_hash

log = logging.getLogger("mneme.audit")
Task = Callable[[list[dict[str, Any]]], tuple[str, str]]  # records → (broker list, task message writing them)


class AuditTrail:
    def __init__(self, outbox: AuditOutbox, sink: AuditSink, reads: ReadLog, counters: Counters,
                 user_hash_key: bytes) -> None:
        self._outbox = outbox
        self.sink = sink
        self._reads = reads
        self._counters = counters
        self._hash_key = user_hash_key

    def record(self, tenant: str, user_id: str, action: str, operator_id: str, source: str,
               identity: str | None = None, fields: Mapping[str, object] | None = None) -> dict[str, Any]:
        """A record of ``action`` on the user with ``fields``; ``identity`` names this change among the
        user's (an erasure's time…), or the tenant's next audit sequence number is taken."""
        who = user_hash(self._hash_key, tenant, user_id)
        identity = identity if identity is not None else str(self._counters.next_audit_seq(tenant))
        return record(self._hash_key, tenant, user_id, action, f"{action}:{who}:{identity}", operator_id, source,
                      **(fields or {}))

    def graph_changes(self, changes: Sequence[Change], operator_id: str) -> list[dict[str, Any]]:
        return [graph_write_record(self._hash_key, change, operator_id=operator_id) for change in changes]

    def layer_changes(self, report: AddReport) -> list[dict[str, Any]]:
        """What left the live event layer (moved to the deep tier, or consolidated)."""
        return layer_records(self._hash_key, report)

    def hold(self, records: Sequence[dict[str, Any]]) -> None:
        """Only hold them: whoever holds records sends their task (the redrive re-sends what is held too long)."""
        self._outbox.hold(records)

    def submit(self, records: Sequence[dict[str, Any]], task: Task | None = None) -> None:
        if not records:
            return
        if task is not None:
            self._outbox.hold(records, send=task(list(records)))
            return
        self._outbox.hold(records)
        try:
            self.write(records)
        except Exception:  # noqa: BLE001 - the records are held; the redrive task sends them
            log.exception("could not write %d audit records now; the redrive task will", len(records))

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Into the sink (read records into the read log too), then out of the outbox (``memory.audit`` runs
        this)."""
        self.sink.write(records)
        self._reads.add([r for r in records if is_read(r)])
        self._outbox.release([r["id"] for r in records])

    def overdue(self, older_than_s: float, limit: int) -> list[dict[str, Any]]:
        return self._outbox.overdue(older_than_s, limit)
