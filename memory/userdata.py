"""Every store that holds a user's data, under one protocol: count, export, erase.

Erasure (``memory.erasure``), its verification and the export loop over ``stores(rt)``, so a store cannot be
left out of one of them. The Redis repositories (``memory.state``) implement the protocol themselves; the
ports holding user data (episodic events, the graph, the archive, the per-user keys) through the small
classes below. Every Redis key family in ``memory.state.keys`` names the store that covers it, or why it
holds no user data (``keys.ERASED_BY`` / ``keys.NO_USER_DATA``), and ``tests/test_userdata.py`` fails when a
family, or a store, is not covered. Order matters for erasure: the user's key goes last, so everything
sealed under it is deleted while it can still be told apart, and unreadable after.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memory import maintenance
from memory.archive import decode, user_prefix
from memory.episodic import ALL_STATUSES, StoredEvent
from memory.errors import NotFound
from memory.graph import Status
from memory.runtime import Runtime

EPISODIC_BATCH = 1000


@runtime_checkable
class UserData(Protocol):
    """One store of user data. ``erase`` returns what it removed (its ``name`` → count, and finer counts
    where they say more: a session's messages and jobs)."""

    name: str

    def count(self, tenant: str, user_id: str) -> int: ...

    def export(self, tenant: str, user_id: str) -> Any: ...

    def erase(self, tenant: str, user_id: str) -> dict[str, int]: ...


class _EpisodicEvents:
    name = "episodic_events"

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def count(self, tenant: str, user_id: str) -> int:
        return len(self._rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=1))

    def export(self, tenant: str, user_id: str) -> list[dict]:
        rows = self._rt.episodic_store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=10**6)
        return [exported_event(self._rt, e) for e, _ in rows]

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        store, removed = self._rt.episodic_store, 0
        while batch := store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=EPISODIC_BATCH):
            removed += store.delete(tenant, user_id, [e.event_id for e, _ in batch])
        return {self.name: removed}


class _GraphRelations:
    name = "graph_relations"

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def count(self, tenant: str, user_id: str) -> int:
        return len(self._rt.graph.relations(tenant, user_id, statuses=tuple(Status)))

    def export(self, tenant: str, user_id: str) -> list[dict]:
        return [b.model_dump(mode="json") for b in self._rt.beliefs.profile(tenant, user_id, include_inactive=True)]

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: self._rt.graph.erase_user(tenant, user_id)}


class _ArchiveObjects:
    name = "archive_objects"

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def count(self, tenant: str, user_id: str) -> int:
        return len(self._rt.archive.list(user_prefix(tenant, user_id)))

    def export(self, tenant: str, user_id: str) -> list[dict]:
        events = []
        for name in self._rt.archive.list(user_prefix(tenant, user_id)):
            for record in decode(self._rt.archive.get(name)):
                event, _ = maintenance.from_record(record)
                events.append(exported_event(self._rt, event.model_copy(update={"status": "archived"})))
        return events

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: self._rt.archive.delete_prefix(user_prefix(tenant, user_id))}


class _UserKey:
    name = "keys"

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def count(self, tenant: str, user_id: str) -> int:
        return int(self._rt.user_keys.get(tenant, user_id, create=False) is not None)

    def export(self, tenant: str, user_id: str) -> dict[str, bool]:
        return {"has_key": bool(self.count(tenant, user_id))}

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        try:
            self._rt.user_keys.destroy(tenant, user_id)
        except NotFound:
            return {self.name: 0}
        return {self.name: 1}


def stores(rt: Runtime) -> tuple[UserData, ...]:
    """Every store of user data, in erasure order (the key last)."""
    state = rt.state
    return (state.working, state.policies, state.reviews, state.devices, state.dead_letters, state.feedback_pairs,
            _EpisodicEvents(rt), _GraphRelations(rt), _ArchiveObjects(rt), _UserKey(rt))


def exported_event(rt: Runtime, event: StoredEvent) -> dict:
    revealed = rt.episodic.reveal(event)
    return {
        "event_id": event.event_id, "type": event.event_type.value, "role": event.role.value, "ts": event.ts,
        "session_id": event.session_id, "status": event.status, "message_ids": event.message_ids,
        "confidence": event.confidence, "count": event.count, "weight": event.weight, "noise": event.noise,
        "summary": revealed.summary if revealed else None, "keywords": revealed.keywords if revealed else None,
        "text": revealed.text if revealed else None, "readable": revealed is not None,
    }


def count(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    """What is still stored for this user, store by store."""
    return {store.name: int(store.count(tenant, user_id)) for store in stores(rt)}


def export(rt: Runtime, tenant: str, user_id: str) -> dict[str, Any]:
    """Everything kept about the user, store by store, opened where their key still exists."""
    return {store.name: store.export(tenant, user_id) for store in stores(rt)}


def erase(rt: Runtime, tenant: str, user_id: str) -> dict[str, int]:
    removed: dict[str, int] = {}
    for store in stores(rt):
        removed.update(store.erase(tenant, user_id))
    return removed
