"""Per-user policy: consent to long-term memory per purpose, child mode, and erasure tombstones.

- Long-term memory (episodic and graph) is off until the user opts in (``consent_required``, default on);
  before that only working memory is kept. Consent is given per purpose (``memory.purposes``; one atomic step,
  ``lua/consent.lua``): long-term memory is kept while at least one purpose is granted and ``long_term`` is on
  (off is a pause: nothing new is kept, nothing is recalled, what is held stays).
- Child mode (a user under 13, declared in conversation or set through the API): no graph writes,
  episodic events without content (type only), working memory encrypted at rest.
- An erased user leaves a tombstone (hashed id, erasure time): work queued before the erasure is dropped.
- A store write for a user holds a lease while it runs (``writing``): it checks the tombstone before and after
  writing (and undoes its write if the user was erased meanwhile); an erasure waits for the leases taken before
  it (``wait_for_writers``), so its receipt says complete only once no write raced it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from pydantic import BaseModel, Field, PrivateAttr

from memory.purposes import Grants
from memory.settings import Settings
from memory.state import keys
from memory.state.client import decoded, members, scored
from memory.state.lua import script
from memory.userhash import user_hash

WRITE_LEASE_S = 120.0  # a store write holds its lease at most this long (a writer that died lets go by then)

CHILD_AGE = 13


class Policy(BaseModel):
    user_id: str
    long_term: bool
    consent_required: bool
    purposes: list[str] = Field(default_factory=list, description="The purposes the user granted.")
    withdrawn_purposes: list[str] = Field(default_factory=list, description="Purposes granted once, withdrawn since.")
    consent_changed_at: float | None = None
    consent_by: str | None = None
    child: bool = False
    child_by: str | None = None
    _grants: dict[str, int] = PrivateAttr(default_factory=dict)  # ``memory.purposes.Grants``: purpose → n / -n

    @property
    def keeps_long_term(self) -> bool:
        return (self.long_term or not self.consent_required) and bool(self.purposes)

    @property
    def consent(self) -> Grants:
        return Grants(self._grants)

    def why_no_beliefs(self) -> str | None:
        """Why no belief may be written for this user (by anyone, a correction included), or None."""
        if self.child:
            return "the user is in child mode, and no beliefs are kept for a child"
        if not self.keeps_long_term:
            return "the user has not consented to long-term memory: grant consent first (PUT .../consent)"
        return None

    def why_not_served(self, purpose: str | None) -> str | None:
        """Why long-term memory may not be read for ``purpose`` (None: any purpose granted), or None."""
        if not self.keeps_long_term:
            return "off: the user has not consented to long-term memory"
        if purpose is not None and purpose not in self.purposes:
            return f"off for purpose {purpose!r}: the user has not granted it (granted: {self.purposes})"
        return None


class Policies:
    def __init__(self, client: redis.Redis, settings: Settings, user_hash_key: bytes) -> None:
        self._redis = client
        self._settings = settings
        self._hash_key = user_hash_key
        self._consent = client.register_script(script("consent.lua"))

    def get(self, tenant: str, user_id: str) -> Policy:
        return self._policy(user_id, decoded(self._redis.hgetall(keys.user(tenant, user_id))))

    def is_child(self, tenant: str, user_id: str) -> bool:
        """Whether the user is under child mode (one field read: a session starting asks only this)."""
        return bool(self._redis.hget(keys.user(tenant, user_id), "child") == "1")

    def get_each(self, users: Sequence[tuple[str, str]]) -> list[Policy]:
        """The policy of each (tenant, user id), in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for tenant, user_id in users:
            pipe.hgetall(keys.user(tenant, user_id))
        return [self._policy(user_id, decoded(fields)) for (_, user_id), fields in zip(users, pipe.execute(),
                                                                                         strict=True)]

    def _policy(self, user_id: str, fields: dict[str, str]) -> Policy:
        long_term = fields.get("long_term") == "1"
        configured = self._settings.purposes
        grants = {name: int(n) for field, n in fields.items()
                  if (name := field.removeprefix("purpose:")) != field and name in configured}
        if not any(field.startswith("purpose:") for field in fields) and (
                long_term or not self._settings.consent_required):
            grants = dict.fromkeys(configured, 1)  # consent given before purposes existed: grant 1 of each
        consent = Grants(grants)
        policy = Policy(
            user_id=user_id, consent_required=self._settings.consent_required, long_term=long_term,
            purposes=consent.granted, withdrawn_purposes=consent.withdrawn,
            consent_changed_at=float(fields["consent_at"]) if "consent_at" in fields else None,
            consent_by=fields.get("consent_by"), child=fields.get("child") == "1", child_by=fields.get("child_by"),
        )
        policy._grants = grants
        return policy

    def set_consent(self, tenant: str, user_id: str, operator_id: str, *, long_term: bool | None = None,
                    op: str = "set", purposes: Sequence[str] = ()) -> tuple[Policy, list[str]]:
        """Change the user's consent in one step: ``long_term`` on or off (None: as it is), and the purposes
        granted — ``op`` "set" (exactly ``purposes``), "grant" (these too) or "withdraw" (these no longer). The
        policy after, and the purposes this change withdrew."""
        withdrawn = self._consent(keys=[keys.user(tenant, user_id)], args=[
            time.time(), operator_id, "" if long_term is None else int(long_term), op,
            int(self._settings.consent_required), len(self._settings.purposes), *self._settings.purposes,
            *purposes])
        return self.get(tenant, user_id), sorted(withdrawn)

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

    @contextmanager
    def writing(self, users: Collection[tuple[str, str]]) -> Iterator[None]:
        """A store write for these (tenant, user id) pairs is under way: a lease each, which an erasure waits for
        (``wait_for_writers``); it ends with the block, or after ``WRITE_LEASE_S`` if its process dies."""
        token = uuid.uuid4().hex
        leases = [(tenant, f"{user_hash(self._hash_key, tenant, user_id)}|{token}") for tenant, user_id in users]
        pipe = self._redis.pipeline(transaction=False)
        for tenant, lease in leases:
            pipe.zadd(keys.writing(tenant), {lease: time.time() + WRITE_LEASE_S})
        pipe.execute()
        try:
            yield
        finally:
            for tenant, lease in leases:
                pipe.zrem(keys.writing(tenant), lease)
            pipe.execute()

    def writers(self, tenant: str, user_id: str) -> int:
        """How many store writes for the user are under way (live leases)."""
        now = time.time()
        self._redis.zremrangebyscore(keys.writing(tenant), "-inf", now)
        mine = f"{user_hash(self._hash_key, tenant, user_id)}|"
        return sum(lease.startswith(mine) for lease in members(self._redis.zrangebyscore(keys.writing(tenant), now,
                                                                                          "+inf")))

    def wait_for_writers(self, tenant: str, user_id: str, timeout_s: float) -> bool:
        """Wait until no store write for the user is under way; False if one still is after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.writers(tenant, user_id):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    # --- the user-data protocol (``memory.userdata``) ---
    name = "policy"

    def count(self, tenant: str, user_id: str) -> int:
        withdrew = self._redis.zscore(keys.withdrawing(tenant), user_id) is not None
        return int(self._redis.exists(keys.user(tenant, user_id))) + int(withdrew)

    def export(self, tenant: str, user_id: str) -> dict[str, Any]:
        return self.get(tenant, user_id).model_dump(mode="json")

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        self._redis.zrem(keys.withdrawing(tenant), user_id)
        return {self.name: int(self._redis.delete(keys.user(tenant, user_id)))}

    def erasing(self, tenant: str, limit: int, batch_size: int) -> list[tuple[str, float]]:
        """Users whose erasure is younger than the SLA's verification: (raw user id, erased at)."""
        return self._listed(keys.erasing(tenant), limit, batch_size)

    def withdrew(self, tenant: str, user_id: str, at: float) -> None:
        """The user withdrew a purpose: the privacy sweep looks again until the SLA has passed."""
        self._redis.zadd(keys.withdrawing(tenant), {user_id: at})

    def withdrawing(self, tenant: str, limit: int, batch_size: int) -> list[tuple[str, float]]:
        """Users who withdrew a purpose, and when they last did."""
        return self._listed(keys.withdrawing(tenant), limit, batch_size)

    def withdrawal_checked(self, tenant: str, user_id: str) -> None:
        self._redis.zrem(keys.withdrawing(tenant), user_id)

    def _listed(self, key: str, limit: int, batch_size: int) -> list[tuple[str, float]]:
        return [u for start in range(0, limit, batch_size)
                for u in scored(self._redis.zrange(key, start, min(limit, start + batch_size) - 1, withscores=True))]

    def verified(self, tenant: str, user_id: str) -> None:
        """The erasure was verified after the SLA: the raw id leaves the sweeper's list."""
        self._redis.zrem(keys.erasing(tenant), user_id)

    def forget_tombstones(self, tenant: str, older_than: float) -> None:
        """No queued write can be older than the job TTL: older tombstones have done their job."""
        self._redis.zremrangebyscore(keys.tombstones(tenant), "-inf", older_than)

    def tenants_erasing(self) -> list[str]:
        return self._tenants(keys.erasing)

    def tenants_withdrawing(self) -> list[str]:
        return self._tenants(keys.withdrawing)

    def _tenants(self, key: Callable[[str], str]) -> list[str]:
        prefix, suffix = key("\0").split("\0")  # what surrounds the tenant in the key
        return sorted(k[len(prefix):-len(suffix) or None]
                      for k in self._redis.scan_iter(match=prefix + "*" + suffix, count=500))
