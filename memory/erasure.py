"""Erasure: remove a user from every layer at once, drop their queued work, and prove it.

``erase_user`` first writes a tombstone (work received before it is dropped by every stage), then erases
every store of user data ``memory.userdata.stores`` names — working memory and the user's jobs, policy,
reviews, devices, dead letters, feedback pairs, episodic events of every tier, the graph user (id kept,
everything else cleared), archive objects — and last destroys the user's key (anything sealed under it,
anywhere, is unreadable from then on). Every step is idempotent; ``sweep`` (beat, hourly) runs it again
for users erased in the last ``erasure_sla_hours`` and verifies every store is empty, so a write that
raced the erasure is caught within the SLA. The receipt lists what was removed where and what, if anything, remains.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from memory import userdata
from memory.audit import record
from memory.runtime import Runtime
from memory.userhash import user_hash


class Receipt(BaseModel):
    user: str = Field(description="The hashed user id: the receipt itself holds no personal data.")
    erased_at: float
    removed: dict[str, int]
    remaining: dict[str, int] = Field(description="Anything still found after the erasure (should be all 0).")
    complete: bool


def erase_user(rt: Runtime, tenant: str, user_id: str, operator_id: str, at: float | None = None) -> Receipt:
    at = time.time() if at is None else at
    rt.state.policies.tombstone(tenant, user_id, at)
    removed = userdata.erase(rt, tenant, user_id)
    rt.state.rewrite_append_only_file()
    remaining = verify(rt, tenant, user_id)
    hashed = user_hash(rt.user_hash_key, tenant, user_id)
    receipt = Receipt(user=hashed, erased_at=at, removed=removed, remaining=remaining,
                      complete=not any(remaining.values()))
    rt.audit.write([record(rt.user_hash_key, tenant, user_id, "user.erase", f"erase:{hashed}:{at}", operator_id,
                           "human", removed=removed, complete=receipt.complete)])
    return receipt


def verify(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    """What is still stored for this user, store by store (``memory.userdata.stores``)."""
    return userdata.count(rt, tenant, user_id)


def sweep(rt: Runtime, dry_run: bool = False, limit: int = 1000, batch_size: int = 1000) -> dict:
    """Re-run and verify erasures younger than the SLA; forget a user's raw id once verified after it."""
    sla = rt.settings.erasure_sla_hours * 3600
    now = time.time()
    report = {"checked": 0, "completed": 0, "verified": 0, "incomplete": 0, "dry_run": dry_run}
    policies = rt.state.policies
    for tenant in policies.tenants_erasing():
        for user_id, at in policies.erasing(tenant, limit, batch_size):
            report["checked"] += 1
            remaining = verify(rt, tenant, user_id)
            if any(remaining.values()):
                report["incomplete"] += 1
                if not dry_run:
                    erase_user(rt, tenant, user_id, operator_id="erasure-sweeper", at=at)
                    report["completed"] += 1
            elif now - at > sla and not dry_run:
                policies.verified(tenant, user_id)
                report["verified"] += 1
        if not dry_run:
            policies.forget_tombstones(tenant, now - rt.settings.job_ttl_s)
    if report["checked"] and not dry_run:
        rt.state.rewrite_append_only_file()  # queued work for erased users has drained: drop its traces too
    return report
