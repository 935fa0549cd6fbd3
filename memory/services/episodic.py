"""The episodic memory service: the one owner of the episodic store port (``memory.episodic``).

Events go in sealed under the user's key with keyed index tokens, and come out revealed only here:
adapters never see plaintext content. Recall asks it for one search (``search``: keyword hits for the
cue and its context, vector hits, and the rows behind both); feedback moves an event's weight through it;
privacy deletes, strips and erases through it (it is the ``episodic_events`` store of ``memory.userdata``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidTag
from pydantic import BaseModel, Field

from memory.crypto import UserKeys, keyed_hash, keyed_tokens, seal, unseal
from memory.episodic import ALL_STATUSES, EVICTED, LIVE, MERGED, AddReport, EpisodicStore, StoredEvent
from memory.errors import NotFound
from memory.models import Event, EventType, Role
from memory.provenance import MessageRef, Messages
from memory.purposes import Grants
from memory.settings import Settings
from memory.text import language, tokenize

#: the ids a client chose that an archived record keeps sealed (``EpisodicMemory.archived``)
_SEALED_IDS = ("session_id", "message_ids")


class Revealed(BaseModel):
    summary: str
    keywords: list[str]
    text: str


class ListedEvent(BaseModel):
    """One row of a user's episodic memory as a listing shows it (``GET /v1/users/{id}/events``)."""

    event_id: str
    event_type: EventType
    role: Role
    tier: str = Field(description="'event': in the live event layer (or merged into one of it); 'deep': let go "
                                  "of by the cap, still searchable.")
    status: str = Field(description="live, merged (into canonical_id) or evicted.")
    canonical_id: str | None = None
    session_id: str
    ts: float
    confidence: float
    count: int
    weight: float
    noise: float
    message_ids: list[str]
    collected_under: list[str] = Field(description="The grants it was collected under (purpose#grant; * before "
                                                   "purposes were recorded).")
    summary: str | None = Field(description="None once the user's key is destroyed.")
    keywords: list[str]
    text: str | None = Field(None, description="The message's full text, when asked for.")


#: A listing's tiers and the statuses each holds: the event layer (live, and the rows merged into its events) and
#: the deep tier (what the cap let go of).
TIERS = {"event": (LIVE, MERGED), "deep": (EVICTED,)}
#: Rows read or deleted per round trip when a user's events are walked (export, erasure, a type's deletion).
BATCH = 1000
EVERY = 10**6  # a dump of everything a user holds (export, what a deletion leaves)
MIN_WEIGHT, MAX_WEIGHT = 0.1, 3.0  # an event's retrieval weight stays in this range, whatever the feedback


@dataclass(frozen=True)
class Found:
    """One search's evidence: keyword strength and vector similarity per event id, and the rows they name."""

    keyword: dict[str, float]
    similarity: dict[str, float]
    rows: list[StoredEvent]


class EpisodicMemory:
    name = "episodic_events"

    def __init__(self, store: EpisodicStore, keys: UserKeys, settings: Settings) -> None:
        self.store = store
        self._keys = keys
        self._settings = settings

    def add(self, events: Sequence[Event], vectors: np.ndarray, texts: Mapping[str, str]) -> AddReport:
        """Store (or merge) events; ``texts`` maps event id → the cleaned text of its message."""
        stored = [self._protect(e, texts.get(e.event_id, "")) for e in events]
        s = self._settings
        return self.store.add(stored, vectors, s.merge_threshold, s.events_cap, s.consolidate_threshold)

    def _protect(self, event: Event, text: str) -> StoredEvent:
        key = self._keys.get(event.tenant, event.user_id)
        payload = json.dumps({"summary": event.summary, "keywords": event.keywords, "text": text},
                             ensure_ascii=False).encode()
        return StoredEvent(
            **event.model_dump(include={"event_id", "tenant", "user_id", "session_id", "ts", "event_type", "role",
                                        "message_ids", "confidence", "count", "weight", "purposes"}),
            lang=language(text), sealed=seal(key, payload, event.event_id),
            tokens=keyed_tokens(key, event.tokens), text_hash=keyed_hash(key, event.text_hash),
        )

    def text_hash(self, tenant: str, user_id: str, digest: str) -> str:
        """``digest`` (a text's sha256) as the user's stored events hold it; "" for a user without a key."""
        key = self._keys.get(tenant, user_id, create=False)
        return keyed_hash(key, digest) if key is not None else ""

    def reveal(self, event: StoredEvent) -> Revealed | None:
        """The event's content, or None once the user's key is destroyed (the text is gone for good)."""
        key = self._keys.get(event.tenant, event.user_id, create=False)
        if key is None:
            return None
        try:
            return Revealed.model_validate_json(unseal(key, event.sealed, event.event_id))
        except InvalidTag:
            return None

    def keyword_search(self, tenant: str, user_id: str, query: str, types: Collection[EventType] | None,
                       k: int, purposes: Collection[str] | None = None,
                       among: Collection[str] | None = None) -> list[tuple[str, float]]:
        key = self._keys.get(tenant, user_id, create=False)
        if key is None:
            return []
        return self.store.keyword_search(tenant, user_id, keyed_tokens(key, tokenize(query)), types, k,
                                         purposes=purposes, among=among)

    def search(self, tenant: str, user_id: str, main: str, context: str, vector: np.ndarray,
               types: Collection[EventType] | None, depth: int, purposes: Collection[str] | None = None) -> Found:
        """The candidates — the ``depth`` best events by keywords (the main cue's, plus ``context_weight`` of
        the context's) and the ``depth`` best by vector similarity, over every tier — each scored on every
        signal (a candidate found by one signal is looked up in the others, never counted as 0 for falling
        outside their top ``depth``), with their rows; only rows recorded under one of ``purposes`` (grant
        tokens, ``memory.purposes``; None: every row)."""
        def by_keyword(text: str, among: Collection[str] | None = None) -> dict[str, float]:
            k = depth if among is None else len(among)
            return dict(self.keyword_search(tenant, user_id, text, types, k, purposes, among)) if text else {}

        def by_vector(among: Collection[str] | None = None) -> dict[str, float]:
            k = depth if among is None else len(among)
            return dict(self.store.vector_search(tenant, user_id, vector, types, k, purposes=purposes, among=among))

        found = {"main": by_keyword(main), "context": by_keyword(context), "vector": by_vector()}
        candidates = list(dict.fromkeys(event_id for scores in found.values() for event_id in scores))
        if not candidates:
            return Found({}, {}, [])
        for name, scores in found.items():
            if len(scores) < depth:  # the signal scored every row it matches: a row it did not name scores 0
                continue
            if missing := [event_id for event_id in candidates if event_id not in scores]:
                scores |= by_vector(missing) if name == "vector" else by_keyword(main if name == "main" else context,
                                                                                  missing)
        weight = self._settings.context_weight
        keyword = {e: found["main"].get(e, 0.0) + weight * found["context"].get(e, 0.0) for e in candidates}
        return Found(keyword, found["vector"], self.store.get(tenant, user_id, candidates))

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        return self.store.get(tenant, user_id, list(event_ids))

    def page(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             tiers: Collection[str] = TIERS, message_ids: Collection[str] | None = None,
             session_id: str | None = None, before: tuple[float, str] | None = None, limit: int = 50,
             include_text: bool = False) -> list[ListedEvent]:
        """A page of the user's events, newest first, revealed (``EpisodicStore.page``)."""
        statuses = [status for tier in tiers for status in TIERS[tier]]
        rows = self.store.page(tenant, user_id, types=types, statuses=statuses, message_ids=message_ids,
                               session_id=session_id, before=before, limit=limit)
        listed = []
        for row in rows:
            shown = self.reveal(row)
            listed.append(ListedEvent(
                **row.model_dump(include={"event_id", "event_type", "role", "status", "canonical_id", "session_id",
                                          "ts", "confidence", "count", "weight", "noise", "message_ids"}),
                tier="deep" if row.status == EVICTED else "event", collected_under=row.purposes,
                summary=shown.summary if shown else None, keywords=shown.keywords if shown else [],
                text=shown.text if shown and include_text else None))
        return listed

    def reweigh(self, tenant: str, user_id: str, event_id: str, factor: float) -> float:
        """Multiply an event's retrieval weight (feedback), kept in ``MIN_WEIGHT``–``MAX_WEIGHT``; the new weight."""
        found = self.store.get(tenant, user_id, [event_id])
        if not found:
            raise NotFound(f"user {user_id!r} has no event {event_id!r}")
        weight = min(MAX_WEIGHT, max(MIN_WEIGHT, found[0].weight * factor))
        self.store.update(tenant, user_id, [event_id], weight=weight)
        return weight

    def retract(self, tenant: str, user_id: str, messages: Messages) -> int:
        return self.store.retract(tenant, user_id, messages)

    def delete_type(self, tenant: str, user_id: str, event_type: EventType) -> tuple[int, Messages]:
        """Delete every stored event of one type, of every status: how many, and the messages they were made
        from that no event of another type still holds (what long-term memory no longer has of them). Every
        message has a row of its own for each type it made (a merge points it at another, keeps it)."""
        removed, messages = 0, set()
        while batch := self.store.dump(tenant, user_id, types={event_type}, statuses=ALL_STATUSES, limit=BATCH):
            messages |= {_made_from(e) for e, _ in batch}
            removed += self.store.delete(tenant, user_id, [e.event_id for e, _ in batch])
        kept = Messages(_made_from(e) for e, _ in self.store.dump(tenant, user_id, statuses=ALL_STATUSES,
                                                                  limit=EVERY))  # every type left
        return removed, Messages(ref for ref in messages if not kept.holds(*ref))

    def messages_unserved(self, tenant: str, user_id: str, consent: Grants) -> Messages:
        """The messages whose rows serve none of the purposes ``consent`` grants (all of a message's rows were
        collected under the same grants): what a withdrawal leaves without a purpose."""
        rows = self.store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=EVERY)
        return Messages(_made_from(e) for e, _ in rows if not consent.serves(e.purposes))

    def strip_content(self, tenant: str, user_id: str, sealed: Callable[[str], bytes], lang: str) -> int:
        return self.store.strip_content(tenant, user_id, sealed, lang)

    def ping(self) -> None:
        self.store.ping()

    # --- user data (``memory.userdata``) ----------------------------------------------------------------
    def count(self, tenant: str, user_id: str) -> int:
        return len(self.store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=1))

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        rows = self.store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=EVERY)
        return [self.exported(e) for e, _ in rows]

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        removed = 0
        while batch := self.store.dump(tenant, user_id, statuses=ALL_STATUSES, limit=BATCH):
            removed += self.store.delete(tenant, user_id, [e.event_id for e, _ in batch])
        return {self.name: removed}

    def archived(self, event: StoredEvent, vector: np.ndarray) -> dict[str, Any]:
        """An event as a cold-archive record keeps it: no raw id (tenant, user, session, message ids — the
        object's name is hashed, these are sealed under the user's key with the content), its vector inline."""
        record = event.model_dump(mode="json", exclude={"sealed", "tenant", "user_id", *_SEALED_IDS})
        key = self._keys.get(event.tenant, event.user_id)
        said = json.dumps(event.model_dump(mode="json", include=set(_SEALED_IDS)), ensure_ascii=False).encode()
        record["ids"] = base64.b64encode(seal(key, said, f"ids\x1f{event.event_id}")).decode()
        record["sealed"] = base64.b64encode(event.sealed).decode()
        record["vector"] = base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()
        return record

    def unarchived(self, tenant: str, user_id: str, record: dict[str, Any]) -> tuple[StoredEvent, np.ndarray] | None:
        """``archived``'s record as the event it was (live again), or None once the user's key is gone."""
        key = self._keys.get(tenant, user_id, create=False)
        if key is None:
            return None
        record = dict(record)
        vector = np.frombuffer(base64.b64decode(record.pop("vector")), dtype=np.float32)
        ids = json.loads(unseal(key, base64.b64decode(record.pop("ids")), f"ids\x1f{record['event_id']}"))
        event = StoredEvent(**{**record, **ids, "tenant": tenant, "user_id": user_id, "status": LIVE,
                               "sealed": base64.b64decode(record["sealed"])})
        return event, vector

    def exported(self, event: StoredEvent) -> dict[str, Any]:
        """An event as the user's export shows it: opened while their key exists."""
        revealed = self.reveal(event)
        return {
            "event_id": event.event_id, "type": event.event_type.value, "role": event.role.value, "ts": event.ts,
            "session_id": event.session_id, "status": event.status, "message_ids": event.message_ids,
            "confidence": event.confidence, "count": event.count, "weight": event.weight, "noise": event.noise,
            "summary": revealed.summary if revealed else None, "keywords": revealed.keywords if revealed else None,
            "text": revealed.text if revealed else None, "readable": revealed is not None,
            "collected_under": event.purposes,
        }


def _made_from(event: StoredEvent) -> MessageRef:
    """The message a row was made from (the others it lists have rows of their own)."""
    return MessageRef(event.session_id, event.message_id)
