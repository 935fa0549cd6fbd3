"""Every store that holds a user's data, and how each is counted, exported and erased.

Erasure (``memory.erasure``), its verification and the export loop over ``STORES``, so a store cannot be
left out of one of them; every Redis key family in ``memory.keys`` names the store here that covers it,
or why it holds no user data (``keys.ERASED_BY`` / ``keys.NO_USER_DATA``), and ``tests/test_userdata.py``
fails when a family, or a store, is not covered. Order matters for erasure: the user's key goes last, so
everything sealed under it is deleted while it can still be told apart, and unreadable after.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory import deadletters, ids, keys, maintenance
from memory.archive import decode, user_prefix
from memory.crypto import open_text, seal_text
from memory.episodic import ALL_STATUSES, StoredEvent
from memory.errors import NotFound
from memory.graph import Status
from memory.runtime import Runtime

EPISODIC_BATCH = 1000
FEEDBACK_PAIRS_KEPT = 1000  # per user: the newest useful (query, event) pairs


@dataclass(frozen=True)
class Store:
    """One store of user data. ``erase`` returns what it removed (its ``name`` → count, and finer counts
    where they say more: a session's messages and jobs)."""

    name: str
    count: Callable[[Runtime, str, str], int]
    export: Callable[[Runtime, str, str], Any]
    erase: Callable[[Runtime, str, str], dict[str, int]]


# --- working memory: sessions, their messages, jobs and failure marks -------------------------------

def _owned_sessions(rt: Runtime, tenant: str, user_id: str) -> list[str]:
    return sorted(s for s in rt.redis.smembers(keys.user_sessions(tenant, user_id))
                  if rt.redis.hget(keys.session(tenant, s).meta, "user") in (None, user_id))


def _count_sessions(rt: Runtime, tenant: str, user_id: str) -> int:
    return sum(rt.redis.exists(keys.session(tenant, s).meta) for s in _owned_sessions(rt, tenant, user_id))


def _erase_sessions(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    sessions = _owned_sessions(rt, tenant, user_id)
    messages = jobs = 0
    for session_id in sessions:
        k = keys.session(tenant, session_id)
        job_ids = [ids.job_id(tenant, session_id, m) for m in rt.redis.hkeys(k.ids)]
        pipe = rt.redis.pipeline()
        for job_id in job_ids:
            pipe.delete(keys.job(job_id))
            pipe.zrem(keys.PENDING, job_id)
        pipe.delete(*k.all(), keys.failed_session(tenant, session_id))
        pipe.execute()
        messages += len(job_ids)
        jobs += len(job_ids)
    rt.redis.delete(keys.user_sessions(tenant, user_id))
    return {"sessions": len(sessions), "messages": messages, "jobs": jobs}


def _export_sessions(rt: Runtime, tenant: str, user_id: str) -> list[dict]:
    """Each session's window at head (cut replies whole), plus messages only older kept versions hold."""
    sessions = []
    for session_id in _owned_sessions(rt, tenant, user_id):
        try:
            head = rt.working.read(tenant, session_id)
        except NotFound:
            continue
        seen = {m.message_id for m in head.messages}
        older = []
        for version in range(head.head - 1, max(-1, head.head - rt.settings.versions_kept), -1):
            try:
                kept = rt.working.read(tenant, session_id, version)
            except NotFound:
                break
            older += [m for m in kept.messages if m.message_id not in seen]
            seen |= {m.message_id for m in kept.messages}
        sessions.append({"session_id": session_id, "version": head.head,
                         "messages": [_message(rt, tenant, m) for m in head.messages],
                         "rolled_back_messages": [_message(rt, tenant, m) for m in older]})
    return sessions


def _message(rt: Runtime, tenant: str, message) -> dict:  # noqa: ANN001 - a working.StoredMessage
    record = message.model_dump(mode="json", exclude={"seq"})
    if message.truncated:
        try:
            record["content"] = rt.working.get(tenant, message.session_id, message.message_id)[1]
            record["truncated"] = False
        except NotFound:
            pass
    return record


# --- account state in Redis: policy, reviews, devices, dead letters, feedback pairs ---------------

def _erase_policy(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    return {"policy": rt.redis.delete(keys.user(tenant, user_id))}


def _review_ids(rt: Runtime, tenant: str, user_id: str) -> list[str]:
    return rt.redis.zrange(keys.reviews(tenant, user_id), 0, -1)


def _export_reviews(rt: Runtime, tenant: str, user_id: str) -> list[dict]:
    out = []
    for review_id in _review_ids(rt, tenant, user_id):
        try:
            out.append(rt.beliefs.reviews.get(tenant, user_id, review_id).model_dump(mode="json"))
        except NotFound:  # resolved long ago and expired
            continue
    return out


def _erase_reviews(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    review_ids = _review_ids(rt, tenant, user_id)
    rt.redis.delete(*(keys.review(tenant, r) for r in review_ids), keys.reviews(tenant, user_id))
    return {"reviews": len(review_ids)}


def _devices(rt: Runtime, tenant: str, user_id: str) -> list[str]:
    return sorted(d for d, owner in rt.redis.hgetall(keys.devices(tenant)).items() if owner == user_id)


def _erase_devices(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    bound = _devices(rt, tenant, user_id)
    if bound:
        rt.redis.hdel(keys.devices(tenant), *bound)
    return {"devices": len(bound)}


def _erase_dead_letters(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    return {"dead_letters": sum(deadletters.remove(rt.redis, d.id)
                                for d in deadletters.of_user(rt.redis, tenant, user_id))}


def _pairs_context(tenant: str, user_id: str) -> str:
    return f"feedback-pair\x1f{tenant}\x1f{user_id}"


def keep_feedback_pair(rt: Runtime, tenant: str, user_id: str, query: str, event_id: str) -> None:
    """A (query, event) pair the user marked useful, sealed under the user's key (for adapter training)."""
    item = json.dumps({"query": query, "event_id": event_id}, ensure_ascii=False)
    sealed = seal_text(rt.keys.get(tenant, user_id), item, _pairs_context(tenant, user_id))
    pipe = rt.redis.pipeline()
    pipe.lpush(keys.feedback_pairs(tenant, user_id), sealed)
    pipe.ltrim(keys.feedback_pairs(tenant, user_id), 0, FEEDBACK_PAIRS_KEPT - 1)
    pipe.execute()


def feedback_pairs(rt: Runtime, tenant: str, user_id: str) -> list[dict]:
    """The user's kept pairs, opened; none once their key is gone."""
    key = rt.keys.get(tenant, user_id, create=False)
    out = []
    for raw in rt.redis.lrange(keys.feedback_pairs(tenant, user_id), 0, -1):
        opened = open_text(key, raw, _pairs_context(tenant, user_id)) if key else None
        if opened is not None:
            out.append(json.loads(opened))
    return out


def users_with_feedback_pairs(rt: Runtime, tenant: str) -> list[str]:
    prefix = keys.feedback_pairs(tenant, "")
    return sorted(k[len(prefix):] for k in rt.redis.scan_iter(match=prefix + "*", count=500))


# --- long-term stores -------------------------------------------------------------------------------

def _count_events(rt: Runtime, tenant: str, user_id: str) -> int:
    return len(rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=1))


def _export_events(rt: Runtime, tenant: str, user_id: str) -> list[dict]:
    return [_event(rt, e) for e, _ in rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=10**6)]


def _erase_events(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    removed = 0
    while batch := rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=EPISODIC_BATCH):
        removed += rt.episodic_store.delete(tenant, user_id, [e.event_id for e, _ in batch])
    return {"episodic_events": removed}


def _event(rt: Runtime, event: StoredEvent) -> dict:
    revealed = rt.episodic.reveal(event)
    return {
        "event_id": event.event_id, "type": event.event_type.value, "role": event.role.value, "ts": event.ts,
        "session_id": event.session_id, "status": event.status, "message_ids": event.message_ids,
        "confidence": event.confidence, "count": event.count, "weight": event.weight, "noise": event.noise,
        "summary": revealed.summary if revealed else None, "keywords": revealed.keywords if revealed else None,
        "text": revealed.text if revealed else None, "readable": revealed is not None,
    }


def _export_archive(rt: Runtime, tenant: str, user_id: str) -> list[dict]:
    events = []
    for name in rt.archive.list(user_prefix(tenant, user_id)):
        for record in decode(rt.archive.get(name)):
            event, _ = maintenance.from_record(record)
            events.append(_event(rt, event.model_copy(update={"status": "archived"})))
    return events


def _erase_key(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    try:
        rt.keys.destroy(tenant, user_id)
    except NotFound:
        return {"keys": 0}
    return {"keys": 1}


def _one(fn: Callable[[Runtime, str, str], Any], name: str) -> Callable[[Runtime, str, str], dict[str, int]]:
    return lambda rt, tenant, user_id: {name: fn(rt, tenant, user_id)}


#: Every store of user data, in erasure order (the key last).
STORES: tuple[Store, ...] = (
    Store("sessions", _count_sessions, _export_sessions, _erase_sessions),
    Store("policy", lambda rt, t, u: rt.redis.exists(keys.user(t, u)),
          lambda rt, t, u: rt.policies.get(t, u).model_dump(mode="json"), _erase_policy),
    Store("reviews", lambda rt, t, u: rt.redis.zcard(keys.reviews(t, u)), _export_reviews, _erase_reviews),
    Store("devices", lambda rt, t, u: len(_devices(rt, t, u)), _devices, _erase_devices),
    Store("dead_letters", lambda rt, t, u: len(deadletters.of_user(rt.redis, t, u)),
          lambda rt, t, u: [d.model_dump(mode="json") for d in deadletters.of_user(rt.redis, t, u)],
          _erase_dead_letters),
    Store("feedback_pairs", lambda rt, t, u: rt.redis.llen(keys.feedback_pairs(t, u)), feedback_pairs,
          _one(lambda rt, t, u: rt.redis.delete(keys.feedback_pairs(t, u)), "feedback_pairs")),
    Store("episodic_events", _count_events, _export_events, _erase_events),
    Store("graph_relations", lambda rt, t, u: len(rt.graph.relations(t, u, statuses=tuple(Status))),
          lambda rt, t, u: [b.model_dump(mode="json") for b in rt.beliefs.profile(t, u, include_inactive=True)],
          _one(lambda rt, t, u: rt.graph.erase_user(t, u), "graph_relations")),
    Store("archive_objects", lambda rt, t, u: len(rt.archive.list(user_prefix(t, u))), _export_archive,
          _one(lambda rt, t, u: rt.archive.delete_prefix(user_prefix(t, u)), "archive_objects")),
    Store("keys", lambda rt, t, u: int(rt.keys.get(t, u, create=False) is not None),
          lambda rt, t, u: {"has_key": rt.keys.get(t, u, create=False) is not None}, _erase_key),
)


def count(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    """What is still stored for this user, store by store."""
    return {store.name: int(store.count(rt, tenant, user_id)) for store in STORES}


def export(rt: Runtime, tenant: str, user_id: str) -> dict[str, Any]:
    """Everything kept about the user, store by store, opened where their key still exists."""
    return {store.name: store.export(rt, tenant, user_id) for store in STORES}


def erase(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    removed: dict[str, int] = {}
    for store in STORES:
        removed.update(store.erase(rt, tenant, user_id))
    return removed
