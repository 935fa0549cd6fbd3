"""Per-user policy: consent to long-term memory, child mode, and erasure tombstones.

- Long-term memory (episodic and graph) is off until the user opts in (``consent_required``, default on);
  before that only working memory is kept.
- Child mode (a user under 13, declared in conversation or set through the API): no graph writes,
  episodic events without content (type only), working memory encrypted at rest.
- An erased user leaves a tombstone (hashed id, erasure time): work queued before the erasure is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis
from pydantic import BaseModel

from memory.settings import Settings
from memory.state import keys
from memory.state.client import decoded, scored
from memory.userhash import user_hash

CHILD_AGE = 13


class Policy(BaseModel):
    user_id: str
    long_term: bool
    consent_required: bool
    consent_changed_at: float | None = None
    consent_by: str | None = None
    child: bool = False
    child_by: str | None = None

    @property
    def keeps_long_term(self) -> bool:
        return self.long_term or not self.consent_required

    def why_no_beliefs(self) -> str | None:
        """Why no belief may be written for this user (by anyone, a correction included), or None."""
        if self.child:
            return "the user is in child mode, and no beliefs are kept for a child"
        if not self.keeps_long_term:
            return "the user has not consented to long-term memory: grant consent first (PUT .../consent)"
        return None


class Policies:
    def __init__(self, client: redis.Redis, settings: Settings, user_hash_key: bytes) -> None:
        self._redis = client
        self._settings = settings
        self._hash_key = user_hash_key

    def get(self, tenant: str, user_id: str) -> Policy:
        return self._policy(user_id, decoded(self._redis.hgetall(keys.user(tenant, user_id))))

    def get_each(self, users: Sequence[tuple[str, str]]) -> list[Policy]:
        """The policy of each (tenant, user id), in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for tenant, user_id in users:
            pipe.hgetall(keys.user(tenant, user_id))
        return [self._policy(user_id, decoded(fields)) for (_, user_id), fields in zip(users, pipe.execute(),
                                                                                         strict=True)]

    def _policy(self, user_id: str, fields: dict[str, str]) -> Policy:
        return Policy(
            user_id=user_id, consent_required=self._settings.consent_required,
            long_term=fields.get("long_term") == "1",
            consent_changed_at=float(fields["consent_at"]) if "consent_at" in fields else None,
            consent_by=fields.get("consent_by"), child=fields.get("child") == "1", child_by=fields.get("child_by"),
        )

    def set_consent(self, tenant: str, user_id: str, granted: bool, operator_id: str) -> Policy:
        self._redis.hset(keys.user(tenant, user_id), mapping={
            "long_term": int(granted), "consent_at": time.time(), "consent_by": operator_id})
        return self.get(tenant, user_id)

    def set_child(self, tenant: str, user_id: str, child: bool, by: str) -> Policy:
        self._redis.hset(keys.user(tenant, user_id), mapping={"child": int(child), "child_by": by})
        return self.get(tenant, user_id)

    def session_started(self, tenant: str, user_id: str) -> tuple[int, bool]:
        """A session of the user started: how many they have started, and whether they are a child now (read
        in the same step: ``WorkingMemory.append`` brings the new session under child rules if need be)."""
        pipe = self._redis.pipeline()  # one key: one transaction
        pipe.hincrby(keys.user(tenant, user_id), "sessions", 1)
        pipe.hget(keys.user(tenant, user_id), "child")
        started, child = pipe.execute()
        return int(started), child == "1"

    def child_each(self, users: Sequence[tuple[str, str]]) -> list[bool]:
        """Whether each (tenant, user id) is in child mode, in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for tenant, user_id in users:
            pipe.hget(keys.user(tenant, user_id), "child")
        return [flag == "1" for flag in pipe.execute()]

    def tombstone(self, tenant: str, user_id: str, at: float) -> None:
        pipe = self._redis.pipeline()
        pipe.zadd(keys.tombstones(tenant), {user_hash(self._hash_key, tenant, user_id): at})
        pipe.zadd(keys.erasing(tenant), {user_id: at}, nx=True)
        pipe.execute()

    def erased_after(self, tenant: str, user_id: str, received_at: float) -> bool:
        """True when the user was erased after this message arrived: its work must be dropped."""
        return self.erased_after_each([(tenant, user_id, received_at)])[0]

    def erased_after_each(self, messages: Sequence[tuple[str, str, float]]) -> list[bool]:
        """``erased_after`` for each (tenant, user id, received at), in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for tenant, user_id, _ in messages:
            pipe.zscore(keys.tombstones(tenant), user_hash(self._hash_key, tenant, user_id))
        return [at is not None and received_at <= float(at)
                for at, (_, _, received_at) in zip(pipe.execute(), messages, strict=True)]

    # --- the user-data protocol (``memory.userdata``) ---
    name = "policy"

    def count(self, tenant: str, user_id: str) -> int:
        return int(self._redis.exists(keys.user(tenant, user_id)))

    def export(self, tenant: str, user_id: str) -> dict[str, Any]:
        return self.get(tenant, user_id).model_dump(mode="json")

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: int(self._redis.delete(keys.user(tenant, user_id)))}

    def erasing(self, tenant: str, limit: int, batch_size: int) -> list[tuple[str, float]]:
        """Users whose erasure is younger than the SLA's verification: (raw user id, erased at)."""
        return [u for start in range(0, limit, batch_size)
                for u in scored(self._redis.zrange(keys.erasing(tenant), start, min(limit, start + batch_size) - 1,
                                                   withscores=True))]

    def verified(self, tenant: str, user_id: str) -> None:
        """The erasure was verified after the SLA: the raw id leaves the sweeper's list."""
        self._redis.zrem(keys.erasing(tenant), user_id)

    def forget_tombstones(self, tenant: str, older_than: float) -> None:
        """No queued write can be older than the job TTL: older tombstones have done their job."""
        self._redis.zremrangebyscore(keys.tombstones(tenant), "-inf", older_than)

    def tenants_erasing(self) -> list[str]:
        prefix, suffix = keys.erasing("\0").split("\0")  # what surrounds the tenant in the key
        return sorted(k[len(prefix):-len(suffix) or None]
                      for k in self._redis.scan_iter(match=prefix + "*" + suffix, count=500))
