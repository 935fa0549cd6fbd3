"""The episodic store port. Adapters fill in a few primitives; ranking and fusion live in ``memory.recall``."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np

from memory.models import Event, EventType


class EpisodicStore(Protocol):
    def upsert(self, events: Sequence[Event], vectors: np.ndarray) -> None:
        """Insert or replace events by id (idempotent); ``vectors`` has one row per event."""
        ...

    def keyword_search(
        self, tenant: str, user_id: str, tokens: Sequence[str], types: Collection[EventType] | None, k: int
    ) -> list[tuple[str, float]]:
        """(event_id, BM25 score, higher is better), best first."""
        ...

    def vector_search(
        self, tenant: str, user_id: str, vector: np.ndarray, types: Collection[EventType] | None, k: int
    ) -> list[tuple[str, float]]:
        """(event_id, cosine similarity), best first."""
        ...

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[Event]:
        """The events that exist, in the order asked for."""
        ...

    def ping(self) -> None: ...


def index_tokens(tenant: str, user_id: str, tokens: Sequence[str]) -> list[str]:
    """Search tokens as stored: hashed per user, so the keyword index holds no plaintext and one
    user's words never score another user's events."""
    salt = f"{tenant}\x1f{user_id}\x1f".encode()
    return [hashlib.blake2b(salt + t.encode("utf-8"), digest_size=8).hexdigest() for t in tokens]
