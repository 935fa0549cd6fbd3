"""Aggregate counters, no personal data: the product metrics the accept step counts in its shard
(``lua/counters.lua``: messages, sessions), users and returning users (counted when a user's session starts),
sessions with an operation failure, and feedback."""

from __future__ import annotations

import redis

from memory import ids
from memory.state import keys
from memory.state.client import decoded


class Counters:
    def __init__(self, client: redis.Redis, session_ttl_s: int) -> None:
        self._redis = client
        self._session_ttl_s = session_ttl_s

    def product(self, tenant: str) -> dict[str, int]:
        """Every shard's counters summed (one round trip), with the tenant's own (users, returning users)."""
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.hgetall(keys.metrics(tenant, tag))
        pipe.hgetall(keys.tenant(tenant))
        totals: dict[str, int] = {}
        for counts in pipe.execute():
            for name, value in decoded(counts).items():
                totals[name] = totals.get(name, 0) + int(value)
        totals.pop("audit_seq", None)
        return totals

    def count_user(self, tenant: str, sessions: int) -> None:
        """The user has started their ``sessions``-th session: the first makes them a user, the second a
        returning one."""
        if sessions in (1, 2):
            self._redis.hincrby(keys.tenant(tenant), "users" if sessions == 1 else "returning_users", 1)

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
        return int(self._redis.hincrby(keys.tenant(tenant), "audit_seq", 1))

    def note_failed_session(self, tenant: str, session_id: str) -> None:
        """Count a session as failed once (an operation_failure event in it)."""
        if self._redis.set(keys.failed_session(tenant, session_id), 1, nx=True, ex=self._session_ttl_s):
            self._redis.hincrby(keys.metrics(tenant, ids.shard(tenant, session_id)), "failed_sessions", 1)
