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

from pydantic import BaseModel, Field, model_validator

from memory.mneme import Mneme
from memory.models import Id

USEFUL_FACTOR, NOT_USEFUL_FACTOR = 1.25, 0.5  # the weight stays in 0.1–3 (``memory.services.episodic``)


class FeedbackIn(BaseModel):
    user_id: Id
    useful: bool
    event_id: Id | None = None
    rel_id: Id | None = None
    query: str | None = Field(None, max_length=2000, description="The query that recalled it (for training).")
    operator_id: Id = "user"

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


def give(mneme: Mneme, tenant: str, body: FeedbackIn) -> FeedbackResult:
    """Feedback on an event moves its weight (episodic); on a belief it is evidence (semantic, audited)."""
    if body.event_id is not None:
        factor = USEFUL_FACTOR if body.useful else NOT_USEFUL_FACTOR
        weight = mneme.episodic.reweigh(tenant, body.user_id, body.event_id, factor)
        mneme.state.counters.count_feedback(tenant, body.useful)
        if body.useful and body.query:
            mneme.state.feedback_pairs.keep(tenant, body.user_id, body.query, body.event_id)
        return FeedbackResult(target=body.event_id, weight=weight)
    rel_id = body.rel_id or ""  # exactly one target is set (``FeedbackIn``)
    seq = mneme.state.counters.next_feedback_seq(tenant)
    change = mneme.semantic.feedback(tenant, body.user_id, rel_id, body.useful,
                                     evidence_id=f"feedback:{body.operator_id}:{seq}", operator_id=body.operator_id)
    mneme.state.counters.count_feedback(tenant, body.useful)
    return FeedbackResult(target=rel_id, confidence=change.after if change else None)


def training_pairs(mneme: Mneme, tenant: str) -> list[tuple[str, str]]:
    """(query, the text of the event that answered it) from useful feedback; erased users' are gone."""
    pairs = []
    for user_id in mneme.state.feedback_pairs.users(tenant):
        for item in mneme.state.feedback_pairs.of_user(tenant, user_id):
            found = mneme.episodic.get(tenant, user_id, [item["event_id"]])
            shown = mneme.episodic.reveal(found[0]) if found else None
            if shown and shown.text:
                pairs.append((item["query"], shown.text))
    return pairs


def metrics(mneme: Mneme, tenant: str) -> Metrics:
    counters, feedback = mneme.state.counters.product(tenant), mneme.state.counters.feedback(tenant)
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
