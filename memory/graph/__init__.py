"""The graph store port: User and Concept nodes, user→concept relations with a confidence, a source, a
status and their evidence. Adapters fill in these primitives, each atomic in the backend; what the
primitives are used for (contradictions, cross-device rules, decay, reviews) lives once in
``memory.services.semantic``.

Primitive semantics (every adapter, same numbers):
- ``merge``: applies one piece of evidence to one relation, once (the same ``evidence_id`` on the same
  relation again changes nothing and returns the change it made the first time). Mode ``blend``:
  ``0.3·old + 0.7·new``; ``max``: the higher of the two; ``human``: the new value, source ``human``,
  status active. A new relation starts at the evidence's confidence. Rule or LLM evidence on a relation a
  human set or deleted is recorded but changes nothing: human corrections win. Confidence is clamped
  to 0.1–1.0 and the decay clock (``base_ts``) restarts. The status after an applied merge is
  ``status`` when given (``active`` or ``in_review``; a new relation starts in it, in the same write),
  otherwise active for a new or retired relation and unchanged for the others.
- ``scale``: counter-evidence: multiplies an active relation's confidence by ``factor`` (clamped),
  source ``counter_evidence``, once per evidence id; None if there is no such relation.
- ``set_status``: ``deleted`` (by a human), ``retired`` (by decay) or ``superseded`` (a newer value of a
  single-valued relation); kept with its evidence, out of recall. The action recorded is
  ``STATUS_ACTIONS[status]``.
- ``materialise``: stores a decayed confidence and restarts the decay clock, only if the relation was
  not updated since ``seen_updated_at`` (a merge in between wins).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, Field

from memory.models import FactSource, RelationName
from memory.purposes import ANY

#: Evidence merges as ``OLD_WEIGHT * old + NEW_WEIGHT * new``; counter-evidence multiplies by COUNTER.
OLD_WEIGHT, NEW_WEIGHT, COUNTER = 0.3, 0.7, 0.5
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.1, 1.0


class MergeMode(StrEnum):
    blend = "blend"
    max = "max"
    human = "human"


class Status(StrEnum):
    active = "active"
    retired = "retired"
    deleted = "deleted"
    superseded = "superseded"  # replaced by a newer value of a single-valued relation
    in_review = "in_review"  # a claim that may not displace the value held (a human's, another device's)


STATUS_ACTIONS = {Status.deleted: "delete", Status.retired: "retire", Status.superseded: "supersede",
                  Status.in_review: "hold", Status.active: "restore"}


class RelationKey(BaseModel):
    tenant: str
    user_id: str
    relation: RelationName
    concept_id: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    object: str


class Evidence(BaseModel):
    evidence_id: str
    source: FactSource
    confidence: float = Field(ge=0.0, le=1.0)
    message_ids: list[str] = Field(default_factory=list)
    device_id: str | None = None
    session_id: str | None = None
    ts: float
    note: str = ""
    purposes: list[str] = Field(default_factory=lambda: [ANY], description="The grants the claim was collected "
                                "under (``memory.purposes``); a belief serves a purpose its supporting claims serve.")


class StoredRelation(BaseModel):
    rel_id: str
    tenant: str
    user_id: str
    relation: RelationName
    concept_id: str
    object: str
    confidence: float
    source: FactSource
    status: Status
    created_at: float
    updated_at: float
    base_ts: float = Field(description="When the decay clock last restarted (new evidence or materialised).")


class EvidenceRow(Evidence):
    rel_id: str
    action: str = Field(description="merge:blend | merge:max | merge:human | counter | rescore | delete | retire | "
                                    "supersede | hold | restore | ignored")
    before: float | None
    after: float | None
    applied_at: float


class Change(BaseModel):
    """One graph write, for the audit trail."""

    tenant: str
    user_id: str
    rel_id: str
    relation: RelationName
    object: str
    source: FactSource
    evidence_id: str
    action: str
    before: float | None
    after: float | None

    @property
    def record_id(self) -> str:
        """The same change always has the same id, so a re-sent audit record is recognisably the same."""
        return f"{self.rel_id}:{self.evidence_id}:{self.action}"


def clamp(value: float) -> float:
    return min(MAX_CONFIDENCE, max(MIN_CONFIDENCE, value))


class GraphStore(Protocol):
    def merge(self, key: RelationKey, evidence: Evidence, mode: MergeMode,
              status: Status | None = None) -> Change: ...

    def scale(self, rel_id: str, evidence: Evidence, factor: float) -> Change | None: ...

    def set_status(self, rel_id: str, status: Status, evidence: Evidence) -> Change | None: ...

    def rescore(self, rel_id: str, confidence: float, evidence: Evidence) -> Change | None:
        """Set the confidence recomputed from the evidence that remains (a deletion took some away): the decay
        clock restarts, and the step is recorded as ``rescore`` (before → after). Once per evidence id (a
        repeat returns the first change); None for a relation that does not exist."""
        ...

    def materialise(self, rel_id: str, confidence: float, base_ts: float, seen_updated_at: float) -> bool: ...

    def relations(self, tenant: str, user_id: str, relation: str | None = None,
                  statuses: Sequence[Status] = (Status.active,)) -> list[StoredRelation]:
        """The user's relations, most confident first."""
        ...

    def active_count(self) -> int:
        """How many active relations there are, of every user (what a ``scan`` would walk)."""
        ...

    def scan(self, after_rel_id: str, limit: int) -> list[StoredRelation]:
        """Active relations of every user, ordered by rel_id, after ``after_rel_id`` (for batch jobs)."""
        ...

    def evidence(self, rel_ids: Sequence[str]) -> list[EvidenceRow]:
        """Evidence of these relations, oldest first."""
        ...

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Erasure: delete the user's relations and their evidence, and concepts no one else holds; keep
        the user node's id with every other property cleared. Returns how many relations went."""
        ...

    def ping(self) -> None: ...
