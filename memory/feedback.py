"""Feedback ("memory heat") and the product metrics computed from stored data.

Feedback on a recalled event moves its retrieval weight (useful ×1.25, not useful ×0.5, kept in
0.1–3); on a belief, "not useful" is counter-evidence (×0.5) and "useful" confirms it (source human).
Useful (query, event) pairs are kept, sealed under the user's key, for training the LoRA query adapter
(``memory.state.feedback_pairs``: erased and exported with the user).

Metrics (aggregate counters, no personal data):
- session depth: messages per session;
- cross-session retention: share of users who came back for a second session;
- task success rate: share of sessions without an operation failure;
- memory interference rate: share of feedback on recalled memories that said "not useful".
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field, model_validator

from memory.errors import NotFound
from memory.graph import COUNTER, Change, Evidence, MergeMode, RelationKey
from memory.models import FactSource
from memory.runtime import Runtime

USEFUL_FACTOR, NOT_USEFUL_FACTOR, MIN_WEIGHT, MAX_WEIGHT = 1.25, 0.5, 0.1, 3.0


class FeedbackIn(BaseModel):
    user_id: str
    useful: bool
    event_id: str | None = None
    rel_id: str | None = None
    query: str | None = Field(None, max_length=2000, description="The query that recalled it (for training).")
    operator_id: str = "user"

    @model_validator(mode="after")
    def _one_target(self) -> FeedbackIn:
        if (self.event_id is None) == (self.rel_id is None):
            raise ValueError("send exactly one of event_id or rel_id")
        return self


class FeedbackResult(BaseModel):
    target: str
    weight: float | None = None
    confidence: float | None = None


class Metrics(BaseModel):
    messages: int
    sessions: int
    users: int
    session_depth: float
    cross_session_retention: float
    task_success_rate: float
    memory_interference_rate: float | None
    feedback: int


def give(rt: Runtime, tenant: str, body: FeedbackIn) -> tuple[FeedbackResult, Change | None]:
    if body.event_id:
        found = rt.episodic_store.get(tenant, body.user_id, [body.event_id])
        if not found:
            raise NotFound(f"user {body.user_id!r} has no event {body.event_id!r}")
        factor = USEFUL_FACTOR if body.useful else NOT_USEFUL_FACTOR
        weight = min(MAX_WEIGHT, max(MIN_WEIGHT, found[0].weight * factor))
        rt.episodic_store.update(tenant, body.user_id, [body.event_id], weight=weight)
        rt.state.counters.count_feedback(tenant, body.useful)
        if body.useful and body.query:
            rt.state.feedback_pairs.keep(tenant, body.user_id, body.query, body.event_id)
        return FeedbackResult(target=body.event_id, weight=weight), None
    belief = next((r for r in rt.graph.relations(tenant, body.user_id) if r.rel_id == body.rel_id), None)
    if belief is None:
        raise NotFound(f"user {body.user_id!r} has no active belief {body.rel_id!r}")
    seq = rt.state.counters.next_feedback_seq(tenant)
    evidence = Evidence(evidence_id=f"feedback:{body.operator_id}:{seq}",
                        source=FactSource.human if body.useful else FactSource.counter_evidence,
                        confidence=belief.confidence, ts=time.time(),
                        note="feedback: " + ("useful" if body.useful else "not useful"))
    if body.useful:
        key = RelationKey(tenant=tenant, user_id=body.user_id, relation=belief.relation,
                          concept_id=belief.concept_id, object=belief.object)
        change = rt.graph.merge(key, evidence, MergeMode.human)
    else:
        change = rt.graph.scale(belief.rel_id, evidence, COUNTER)
    rt.state.counters.count_feedback(tenant, body.useful)
    return FeedbackResult(target=belief.rel_id, confidence=change.after if change else None), change


def training_pairs(rt: Runtime, tenant: str) -> list[tuple[str, str]]:
    """(query, the text of the event that answered it) from useful feedback; erased users' are gone."""
    pairs = []
    for user_id in rt.state.feedback_pairs.users(tenant):
        for item in rt.state.feedback_pairs.of_user(tenant, user_id):
            found = rt.episodic_store.get(tenant, user_id, [item["event_id"]])
            shown = rt.episodic.reveal(found[0]) if found else None
            if shown and shown.text:
                pairs.append((item["query"], shown.text))
    return pairs


def metrics(rt: Runtime, tenant: str) -> Metrics:
    counters, feedback = rt.state.counters.product(tenant), rt.state.counters.feedback(tenant)
    sessions, users = counters.get("sessions", 0), counters.get("users", 0)
    total = feedback.get("total", 0)
    return Metrics(
        messages=counters.get("messages", 0), sessions=sessions, users=users,
        session_depth=round(counters.get("messages", 0) / sessions, 3) if sessions else 0.0,
        cross_session_retention=round(counters.get("returning_users", 0) / users, 3) if users else 0.0,
        task_success_rate=round(1 - counters.get("failed_sessions", 0) / sessions, 3) if sessions else 1.0,
        memory_interference_rate=round(feedback.get("not_useful", 0) / total, 3) if total else None,
        feedback=total,
    )
