"""Erasure: remove a user from every layer at once, drop their queued work, and prove it.

``erase_user`` first writes a tombstone (work received before it is dropped by every stage), then clears
working memory and the user's pipeline jobs, deletes episodic events, erases the graph user (id kept,
everything else cleared), deletes archive objects, review items, device bindings and policy, and
destroys the user's key (anything sealed under it, anywhere, is unreadable from then on). Every step is
idempotent; ``sweep`` (beat, hourly) runs it again for users erased in the last
``erasure_sla_hours`` and verifies every store is empty, so a write that raced the erasure is caught
within the SLA. The receipt lists what was removed where and what, if anything, remains.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from memory import deadletters, ids, keys
from memory.audit import record
from memory.episodic import ALL_STATUSES
from memory.errors import NotFound, TransientError
from memory.graph import Status
from memory.policy import user_hash
from memory.runtime import Runtime
from memory.working import REDIS_ERRORS

EPISODIC_BATCH = 1000


class Receipt(BaseModel):
    user: str = Field(description="The hashed user id: the receipt itself holds no personal data.")
    erased_at: float
    removed: dict[str, int]
    remaining: dict[str, int] = Field(description="Anything still found after the erasure (should be all 0).")
    complete: bool


def erase_user(rt: Runtime, tenant: str, user_id: str, operator_id: str, at: float | None = None) -> Receipt:
    at = time.time() if at is None else at
    rt.policies.tombstone(tenant, user_id, at)
    removed = {"sessions": 0, "messages": 0, "jobs": 0}
    try:
        removed.update(_working_memory(rt, tenant, user_id))
        removed["reviews"] = _reviews(rt, tenant, user_id)
        removed["devices"] = _devices(rt, tenant, user_id)
        removed["dead_letters"] = sum(deadletters.remove(rt.redis, d.id)
                                      for d in deadletters.of_user(rt.redis, tenant, user_id))
        rt.redis.delete(keys.user(tenant, user_id))
    except REDIS_ERRORS as exc:
        raise TransientError(f"working memory unavailable during erasure: {exc}") from exc
    removed["episodic_events"] = _episodic(rt, tenant, user_id)
    removed["graph_relations"] = rt.graph.erase_user(tenant, user_id)
    removed["archive_objects"] = rt.archive.delete_prefix(archive_prefix(tenant, user_id))
    try:
        rt.keys.destroy(tenant, user_id)
        removed["keys"] = 1
    except NotFound:
        removed["keys"] = 0
    rewrite_aof(rt)
    remaining = verify(rt, tenant, user_id)
    receipt = Receipt(user=user_hash(tenant, user_id), erased_at=at, removed=removed, remaining=remaining,
                      complete=not any(remaining.values()))
    rt.audit.write([record(tenant, user_id, "user.erase", f"erase:{user_hash(tenant, user_id)}:{at}", operator_id,
                           "human", removed=removed, complete=receipt.complete)])
    return receipt


def verify(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    """What is still stored for this user, store by store."""
    sessions = rt.redis.smembers(keys.user_sessions(tenant, user_id))
    return {
        "sessions": sum(rt.redis.exists(keys.session(tenant, s).meta) for s in sessions),
        "episodic_events": len(rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=1)),
        "graph_relations": len(rt.graph.relations(tenant, user_id, statuses=_ALL_RELATION_STATUSES)),
        "archive_objects": len(rt.archive.list(archive_prefix(tenant, user_id))),
        "keys": int(rt.keys.get(tenant, user_id, create=False) is not None),
        "reviews": rt.redis.zcard(keys.reviews(tenant, user_id)),
        "devices": sum(1 for owner in rt.redis.hvals(keys.devices(tenant)) if owner == user_id),
        "dead_letters": len(deadletters.of_user(rt.redis, tenant, user_id)),
    }


def sweep(rt: Runtime, dry_run: bool = False, limit: int = 1000, batch_size: int = 1000) -> dict:
    """Re-run and verify erasures younger than the SLA; forget a user's raw id once verified after it."""
    sla = rt.settings.erasure_sla_hours * 3600
    now = time.time()
    report = {"checked": 0, "completed": 0, "verified": 0, "incomplete": 0, "dry_run": dry_run}
    for tenant in _tenants(rt):
        users = [u for start in range(0, limit, batch_size)
                 for u in rt.redis.zrange(keys.erasing(tenant), start, min(limit, start + batch_size) - 1,
                                          withscores=True)]
        for user_id, at in users:
            report["checked"] += 1
            remaining = verify(rt, tenant, user_id)
            if any(remaining.values()):
                report["incomplete"] += 1
                if not dry_run:
                    erase_user(rt, tenant, user_id, operator_id="erasure-sweeper", at=at)
                    report["completed"] += 1
            elif now - at > sla and not dry_run:
                rt.redis.zrem(keys.erasing(tenant), user_id)
                report["verified"] += 1
        if not dry_run:  # no queued write can be older than the job TTL: older tombstones have done their job
            rt.redis.zremrangebyscore(keys.tombstones(tenant), "-inf", now - rt.settings.job_ttl_s)
    if report["checked"] and not dry_run:
        rewrite_aof(rt)  # queued work for erased users has drained since: drop its traces from the AOF too
    return report


def rewrite_aof(rt: Runtime) -> None:
    """Redis's append-only file keeps erased commands (and broker messages) until it is rewritten."""
    try:
        rt.redis.bgrewriteaof()
    except Exception:  # noqa: BLE001 - a rewrite already running, or AOF off: the next sweep rewrites
        pass


def archive_prefix(tenant: str, user_id: str) -> str:
    from memory.archive import user_prefix

    return user_prefix(tenant, user_id)


_ALL_RELATION_STATUSES = tuple(Status)


def _working_memory(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    sessions = rt.redis.smembers(keys.user_sessions(tenant, user_id))
    messages = jobs = 0
    for session_id in sessions:
        k = keys.session(tenant, session_id)
        if rt.redis.hget(k.meta, "user") not in (None, user_id):
            continue  # not theirs (cannot happen: a session has one owner) — never delete another's
        message_ids = rt.redis.hkeys(k.ids)
        job_ids = [ids.job_id(tenant, session_id, m) for m in message_ids]
        pipe = rt.redis.pipeline()
        for job_id in job_ids:
            pipe.delete(keys.job(job_id))
            pipe.zrem(keys.PENDING, job_id)
        pipe.delete(*k.all())
        pipe.execute()
        messages += len(message_ids)
        jobs += len(job_ids)
    rt.redis.delete(keys.user_sessions(tenant, user_id))
    return {"sessions": len(sessions), "messages": messages, "jobs": jobs}


def _reviews(rt: Runtime, tenant: str, user_id: str) -> int:
    review_ids = rt.redis.zrange(keys.reviews(tenant, user_id), 0, -1)
    if review_ids:
        rt.redis.delete(*(keys.review(tenant, r) for r in review_ids))
    rt.redis.delete(keys.reviews(tenant, user_id))
    return len(review_ids)


def _devices(rt: Runtime, tenant: str, user_id: str) -> int:
    bound = [d for d, owner in rt.redis.hgetall(keys.devices(tenant)).items() if owner == user_id]
    if bound:
        rt.redis.hdel(keys.devices(tenant), *bound)
    return len(bound)


def _episodic(rt: Runtime, tenant: str, user_id: str) -> int:
    removed = 0
    while batch := rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=EPISODIC_BATCH):
        removed += rt.episodic_store.delete(tenant, user_id, [e.event_id for e, _ in batch])
    return removed


def _tenants(rt: Runtime) -> list[str]:
    prefix = keys.erasing("")
    return sorted({k[len(prefix):] for k in rt.redis.scan_iter(match=prefix + "*", count=500)})
