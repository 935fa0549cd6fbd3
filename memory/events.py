"""Episodic memory as the rest of Mneme sees it: events go in sealed under the user's key with keyed
index tokens, and come out revealed only here. Adapters never see plaintext content."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

import numpy as np
from cryptography.exceptions import InvalidTag
from pydantic import BaseModel

from memory.crypto import UserKeys, keyed_tokens, seal, unseal
from memory.episodic import AddReport, EpisodicStore, StoredEvent
from memory.models import Event, EventType
from memory.settings import Settings
from memory.text import language, tokenize


class Revealed(BaseModel):
    summary: str
    keywords: list[str]
    text: str


class EpisodicMemory:
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
                                        "text_hash", "message_ids", "confidence", "count", "weight"}),
            lang=language(text), sealed=seal(key, payload, event.event_id),
            tokens=keyed_tokens(key, event.tokens),
        )

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
                       k: int) -> list[tuple[str, float]]:
        key = self._keys.get(tenant, user_id, create=False)
        if key is None:
            return []
        return self.store.keyword_search(tenant, user_id, keyed_tokens(key, tokenize(query)), types, k)
