"""Aggregate counters, no personal data: the product metrics the accept step counts (``lua/counters.lua``:
messages, sessions, users, returning users), sessions with an operation failure, and feedback."""

from __future__ import annotations

import redis

from memory.state import keys
from memory.state.client import decoded


class Counters:
    def __init__(self, client: redis.Redis, session_ttl_s: int) -> None:
        self._redis = client
        self._session_ttl_s = session_ttl_s

    def product(self, tenant: str) -> dict[str, int]:
        metrics = decoded(self._redis.hgetall(keys.metrics(tenant)))
        return {k: int(v) for k, v in metrics.items() if k != "audit_seq"}

    def feedback(self, tenant: str) -> dict[str, int]:
        return {k: int(v) for k, v in decoded(self._redis.hgetall(keys.feedback(tenant))).items() if k != "seq"}

    def count_feedback(self, tenant: str, useful: bool) -> None:
        pipe = self._redis.pipeline()
        pipe.hincrby(keys.feedback(tenant), "total", 1)
        pipe.hincrby(keys.feedback(tenant), "not_useful", int(not useful))
        pipe.execute()

    def next_feedback_seq(self, tenant: str) -> int:
        """A number no other feedback of the tenant got: names its evidence."""
        return int(self._redis.hincrby(keys.feedback(tenant), "seq", 1))

    def next_audit_seq(self, tenant: str) -> int:
        """A number no other audit record of the tenant got: names a change that has no identity of its own."""
        return int(self._redis.hincrby(keys.metrics(tenant), "audit_seq", 1))

    def note_failed_session(self, tenant: str, session_id: str) -> None:
        """Count a session as failed once (an operation_failure event in it)."""
        if self._redis.set(keys.failed_session(tenant, session_id), 1, nx=True, ex=self._session_ttl_s):
            self._redis.hincrby(keys.metrics(tenant), "failed_sessions", 1)
