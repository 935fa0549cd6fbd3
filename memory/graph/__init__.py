"""The graph store port: User and Concept nodes, user→concept relations with confidence and provenance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

from memory.models import Fact, FactSource, Relation

#: Evidence merges as ``OLD_WEIGHT * old + NEW_WEIGHT * new``; counter-evidence multiplies by COUNTER.
OLD_WEIGHT, NEW_WEIGHT, COUNTER = 0.3, 0.7, 0.5
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.1, 1.0


class StoredFact(BaseModel):
    rel_id: str
    subject: str
    relation: Relation
    object: str
    concept_id: str
    confidence: float
    source: FactSource
    evidence_count: int
    message_ids: list[str]
    event_ids: list[str]
    created_at: float
    updated_at: float


class Change(BaseModel):
    """One graph write, for the audit trail."""

    tenant: str
    user_id: str
    rel_id: str
    relation: Relation
    object: str
    source: FactSource
    evidence_id: str
    before: float | None
    after: float

    @property
    def record_id(self) -> str:
        """The same change always has the same id, so a re-sent audit record is recognisably the same."""
        return f"{self.rel_id}:{self.evidence_id}:{self.source.value}"


class GraphStore(Protocol):
    def apply(self, facts: Sequence[Fact]) -> list[Change]:
        """Merge each piece of evidence once (applying the same evidence again changes nothing);
        returns what each piece of evidence changed, now or when it was first applied."""
        ...

    def facts(self, tenant: str, user_id: str, limit: int) -> list[StoredFact]:
        """The user's relations, most confident first."""
        ...

    def ping(self) -> None: ...
