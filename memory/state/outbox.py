"""Audit records on their way to the sink, held in Redis until the sink has them.

A task that changes memory puts the audit records of its changes here (``hold``) before it counts as
done, then pushes the ``memory.audit`` task message, which writes them to the sink and ``release``\\s them,
onto the broker. The redrive task re-sends what is held longer than ``redrive_after_s`` (``overdue``), so an
audit message that never reached the broker (its sender died in between) or that the broker lost — a worker
killed in the moment it took the message — is written after all. A record re-sent while its first message
was only slow is stored twice under the same ``id``: readers key on the id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import redis

from memory.state import keys
from memory.state.client import members
from memory.state.dispatch import Dispatch


class AuditOutbox:
    """The outbox (see the module docstring)."""

    def __init__(self, client: redis.Redis, dispatch: Dispatch) -> None:
        self._redis = client
        self._dispatch = dispatch

    def hold(self, records: Sequence[dict[str, Any]], send: tuple[str, str] | None = None) -> None:
        """Hold the records, then push ``send`` (a broker list and the task message that writes them): records
        are never queued without being held."""
        if not records:
            return
        now = time.time()
        pipe = self._redis.pipeline()  # one transaction: both keys have the {audit} tag
        pipe.hset(keys.AUDIT_OUTBOX, mapping={r["id"]: json.dumps(r, ensure_ascii=False) for r in records})
        pipe.zadd(keys.AUDIT_DUE, {r["id"]: now for r in records}, nx=True)
        pipe.execute()
        if send is not None:
            self._dispatch.push([send])

    def release(self, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        pipe = self._redis.pipeline()
        pipe.hdel(keys.AUDIT_OUTBOX, *record_ids)
        pipe.zrem(keys.AUDIT_DUE, *record_ids)
        pipe.execute()

    def overdue(self, older_than_s: float, limit: int) -> list[dict[str, Any]]:
        """Records held longer than ``older_than_s``, oldest first; each is due again only after as long."""
        now = time.time()
        ids = members(self._redis.zrangebyscore(keys.AUDIT_DUE, "-inf", now - older_than_s, start=0, num=limit))
        held = dict(zip(ids, self._redis.hmget(keys.AUDIT_OUTBOX, ids), strict=True)) if ids else {}
        pipe = self._redis.pipeline()
        for record_id, raw in held.items():
            if raw is None:  # written meanwhile
                pipe.zrem(keys.AUDIT_DUE, record_id)
            else:
                pipe.zadd(keys.AUDIT_DUE, {record_id: now}, xx=True)
        pipe.execute()
        return [json.loads(raw) for raw in held.values() if raw is not None]
