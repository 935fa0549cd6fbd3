"""The read path: working memory + episodic hybrid search + graph facts, in one bundle.

Every item says where it came from (message ids) and why it was chosen (score parts).
"""

from __future__ import annotations

import time
from collections.abc import Collection

from pydantic import BaseModel, Field

from memory.errors import MnemeError, NotFound
from memory.models import EventType, FactSource, Relation
from memory.runtime import Runtime
from memory.text import tokenize
from memory.working import StoredMessage

RRF_K = 60  # reciprocal rank fusion constant (Cormack et al.)


class EventHit(BaseModel):
    event_id: str
    event_type: EventType
    summary: str
    keywords: list[str]
    session_id: str
    ts: float
    confidence: float
    count: int
    message_ids: list[str]
    score: float
    why: dict[str, float] = Field(description="keyword_rank, vector_rank, vector_sim, bm25: what made the score")


class FactHit(BaseModel):
    subject: str
    relation: Relation
    object: str
    confidence: float
    source: FactSource
    evidence_count: int
    message_ids: list[str]
    event_ids: list[str]
    updated_at: float
    why: str


class RecallResult(BaseModel):
    user_id: str
    query: str
    working: list[StoredMessage]
    events: list[EventHit]
    facts: list[FactHit]
    degraded: dict[str, str] = Field(default_factory=dict, description="Layers that could not answer, and why.")
    took_ms: float


def recall(
    rt: Runtime,
    tenant: str,
    user_id: str,
    query: str,
    k: int = 5,
    session_id: str | None = None,
    event_types: Collection[EventType] | None = None,
) -> RecallResult:
    started = time.perf_counter()
    degraded: dict[str, str] = {}
    working: list[StoredMessage] = []
    if session_id:
        try:
            working = rt.working.read(tenant, session_id).messages
        except NotFound:
            working = []
        except MnemeError as exc:
            degraded["working"] = exc.message
    events: list[EventHit] = []
    try:
        events = _events(rt, tenant, user_id, query, k, event_types)
    except MnemeError as exc:
        degraded["episodic"] = exc.message
    facts: list[FactHit] = []
    try:
        facts = _facts(rt, tenant, user_id, query)
    except MnemeError as exc:
        degraded["graph"] = exc.message
    return RecallResult(
        user_id=user_id, query=query, working=working, events=events, facts=facts, degraded=degraded,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _events(rt: Runtime, tenant: str, user_id: str, query: str, k: int, types) -> list[EventHit]:
    depth = max(k * 4, 20)
    keyword = rt.episodic.keyword_search(tenant, user_id, tokenize(query), types, depth)
    vector = rt.episodic.vector_search(tenant, user_id, rt.embedder.embed([query])[0], types, depth)
    parts: dict[str, dict[str, float]] = {}
    for rank, (event_id, bm25) in enumerate(keyword, 1):
        parts.setdefault(event_id, {})
        parts[event_id].update(keyword_rank=rank, bm25=round(bm25, 4))
    for rank, (event_id, sim) in enumerate(vector, 1):
        parts.setdefault(event_id, {})
        parts[event_id].update(vector_rank=rank, vector_sim=round(sim, 4))
    scores = {
        event_id: sum(1.0 / (RRF_K + p[name]) for name in ("keyword_rank", "vector_rank") if name in p)
        for event_id, p in parts.items()
    }
    best = sorted(scores, key=scores.__getitem__, reverse=True)[:k]
    return [
        EventHit(**e.model_dump(include=set(EventHit.model_fields)), score=round(scores[e.event_id], 6),
                 why=parts[e.event_id])
        for e in rt.episodic.get(tenant, user_id, best)
    ]


def _facts(rt: Runtime, tenant: str, user_id: str, query: str) -> list[FactHit]:
    """The user's beliefs; those the query mentions first, then by confidence."""
    wanted = set(tokenize(query))
    hits = []
    for fact in rt.graph.facts(tenant, user_id, rt.settings.recall_facts_limit):
        overlap = len(wanted & set(tokenize(fact.object)))
        hits.append((overlap, FactHit(
            **fact.model_dump(include=set(FactHit.model_fields)),
            why="mentioned in the query" if overlap else "part of the user's profile",
        )))
    hits.sort(key=lambda h: (h[0] > 0, h[1].confidence), reverse=True)
    return [hit for _, hit in hits]
