"""The episodic store port. Adapters fill in a few primitives over opaque, already-protected records;
sealing, keyed tokens (``memory.events``) and ranking (``memory.recall``) live once, outside them.

Contract of ``add`` (one user's events, idempotent under redelivery):
- an event id seen before (stored, or merged into another) changes nothing;
- else, a live event of the same user, type and role whose vector has cosine ≥ ``merge_threshold``
  absorbs it: count + 1, confidence ``1 - (1-a)(1-b)`` (at most 0.99), message ids united, latest ts;
- else it is inserted; then, while the user has more than ``cap`` live events, the lowest-value one is
  evicted (``status = evicted``: kept, reported, out of recall). Value, lowest first:
  ``type_weight × confidence × weight × noise × 0.5^(age_days/90) × (1 + log2(count))`` with type_weight
  greeting/small_talk 0.1, statement 0.5, question 0.7, others 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from memory.models import EventBase, EventType

TYPE_WEIGHT = {EventType.greeting: 0.1, EventType.small_talk: 0.1, EventType.statement: 0.5,
               EventType.question: 0.7}
MAX_MERGED_CONFIDENCE = 0.99
UPDATABLE = frozenset({"weight", "noise", "status"})


class StoredEvent(EventBase):
    """An event as the store holds it: metadata, a sealed payload and keyed tokens — no plaintext."""

    lang: str
    weight: float = 1.0
    noise: float = 1.0
    status: str = "live"
    sealed: bytes = Field(repr=False)
    tokens: list[str] = Field(default_factory=list, repr=False)


class Evicted(BaseModel):
    tenant: str
    user_id: str
    event_id: str
    event_type: EventType


class AddReport(BaseModel):
    inserted: list[str] = Field(default_factory=list)
    merged: dict[str, str] = Field(default_factory=dict, description="event id → the event that absorbed it")
    known: list[str] = Field(default_factory=list, description="seen before: nothing changed")
    evicted: list[Evicted] = Field(default_factory=list)


class EpisodicStore(Protocol):
    def add(self, events: Sequence[StoredEvent], vectors: np.ndarray, merge_threshold: float,
            cap: int) -> AddReport: ...

    def keyword_search(self, tenant: str, user_id: str, tokens: Sequence[str],
                       types: Collection[EventType] | None, k: int) -> list[tuple[str, float]]:
        """(event_id, BM25 score, higher is better) over live events, best first."""
        ...

    def vector_search(self, tenant: str, user_id: str, vector: np.ndarray,
                      types: Collection[EventType] | None, k: int) -> list[tuple[str, float]]:
        """(event_id, cosine similarity) over live events, best first."""
        ...

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        """The events that exist (live or evicted), in the order asked for."""
        ...

    def live_count(self, tenant: str, user_id: str) -> int: ...

    def dump(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             before_ts: float | None = None, statuses: Collection[str] = ("live",),
             limit: int = 10_000) -> list[tuple[StoredEvent, np.ndarray]]:
        """Events with their vectors (oldest first): for archiving, compaction, erasure and export."""
        ...

    def delete(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> int:
        """Remove events (and aliases pointing at them) for good; returns how many were removed."""
        ...

    def update(self, tenant: str, user_id: str, event_ids: Sequence[str], **fields: float | str) -> int:
        """Set ``weight`` (feedback), ``noise`` (noise down-weighting) or ``status`` on events."""
        ...

    def users(self, after: tuple[str, str] = ("", ""), limit: int = 1000) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have events, ordered, after ``after``: for batch maintenance."""
        ...

    def ping(self) -> None: ...


def merged_confidence(a: float, b: float) -> float:
    return min(MAX_MERGED_CONFIDENCE, 1 - (1 - a) * (1 - b))


def eviction_value(event: StoredEvent, now: float) -> float:
    age_days = max(0.0, now - event.ts) / 86400
    return (TYPE_WEIGHT.get(event.event_type, 1.0) * event.confidence * event.weight * event.noise
            * 0.5 ** (age_days / 90) * (1 + math.log2(max(1, event.count))))
