"""Per-user policy: consent to long-term memory, child mode, and erasure tombstones.

- Long-term memory (episodic and graph) is off until the user opts in (``consent_required``, default on);
  before that only working memory is kept.
- Child mode (a user under 13, declared in conversation or set through the API): no graph writes,
  episodic events without content (type only), working memory encrypted at rest.
- An erased user leaves a tombstone (hashed id, erasure time): work queued before the erasure is dropped.
"""

from __future__ import annotations

import time

import redis
from pydantic import BaseModel

from memory import keys
from memory.errors import TransientError
from memory.settings import Settings
from memory.userhash import user_hash
from memory.working import REDIS_ERRORS

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
        fields = self._call(self._redis.hgetall, keys.user(tenant, user_id))
        return Policy(
            user_id=user_id, consent_required=self._settings.consent_required,
            long_term=fields.get("long_term") == "1",
            consent_changed_at=float(fields["consent_at"]) if "consent_at" in fields else None,
            consent_by=fields.get("consent_by"), child=fields.get("child") == "1", child_by=fields.get("child_by"),
        )

    def set_consent(self, tenant: str, user_id: str, granted: bool, operator_id: str) -> Policy:
        self._call(self._redis.hset, keys.user(tenant, user_id), mapping={
            "long_term": int(granted), "consent_at": time.time(), "consent_by": operator_id})
        return self.get(tenant, user_id)

    def set_child(self, tenant: str, user_id: str, child: bool, by: str) -> Policy:
        self._call(self._redis.hset, keys.user(tenant, user_id), mapping={"child": int(child), "child_by": by})
        return self.get(tenant, user_id)

    def tombstone(self, tenant: str, user_id: str, at: float) -> None:
        pipe = self._redis.pipeline()
        pipe.zadd(keys.tombstones(tenant), {user_hash(self._hash_key, tenant, user_id): at})
        pipe.zadd(keys.erasing(tenant), {user_id: at}, nx=True)
        self._call(pipe.execute)

    def erased_after(self, tenant: str, user_id: str, received_at: float) -> bool:
        """True when the user was erased after this message arrived: its work must be dropped."""
        at = self._call(self._redis.zscore, keys.tombstones(tenant), user_hash(self._hash_key, tenant, user_id))
        return at is not None and received_at <= at

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except REDIS_ERRORS as exc:
            raise TransientError(f"policy store unavailable: {exc}") from exc
