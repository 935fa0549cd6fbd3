"""Semantic memory: the user's profile, corrections and deletions by a human, and the review queue."""

from __future__ import annotations

from typing import Any

from mneme_client.models import Belief, BeliefHistory, Profile, Review, VocabularyOut, VocabularyRelation

from memory.errors import Conflict, NotFound
from memory.purposes import checked
from workers.api.deps import KEYED, Caller, Memory, OperatorId, PathId, QueryPurpose, Tenant, resource_router
from workers.api.requests import BeliefIn, ResolveIn
from workers.api.wire import out, out_all

router = resource_router()


@router.get("/v1/vocabulary", response_model=VocabularyOut, tags=["semantic memory"], dependencies=KEYED)
def vocabulary(mneme: Memory) -> VocabularyOut:
    """The relations this deployment keeps about a user (its vocabulary file): category, half-life, whether one
    value at a time, the opposite, and what each means."""
    v = mneme.vocabulary
    return VocabularyOut(source=v.source, relations=[VocabularyRelation(
        name=s.name, category=s.category, half_life_days=v.half_life_days(s.name), single_valued=s.single_valued,
        opposite=s.opposite, description=s.description) for s in v.relations.values()])


@router.get("/v1/users/{user_id}/profile", response_model=Profile, tags=["semantic memory"])
def profile(caller: Caller, mneme: Memory, user_id: PathId, include_inactive: bool = False,
            purpose: QueryPurpose = None) -> Profile:
    """What the agent believes about the user: effective (decayed) confidence, source, the purposes each belief
    serves, and why. With ``purpose``, only the beliefs that serve it (none if the user has not granted it);
    ``include_inactive`` shows every belief of every status, whatever it serves. ``known`` is false when nothing
    at all is stored for this user id (a new user, a mistyped id, or one erased): still a 200, so a new user's
    memory page opens. Recorded as read by the caller."""
    if purpose is not None:
        checked([purpose], mneme.settings.purposes)
    beliefs = mneme.semantic.profile(caller.tenant, user_id, include_inactive, purpose=purpose)
    reviews = mneme.semantic.reviews.list_open(caller.tenant, user_id)
    known = bool(beliefs or reviews) or mneme.privacy.knows(caller.tenant, user_id)
    mneme.reads.profiled(caller, user_id, beliefs, reviews, purpose=purpose)
    return Profile(user_id=user_id, beliefs=out_all(Belief, beliefs), open_reviews=out_all(Review, reviews),
                   known=known)


@router.put("/v1/users/{user_id}/beliefs", response_model=Belief, tags=["semantic memory"])
def correct_belief(tenant: Tenant, mneme: Memory, user_id: PathId, body: BeliefIn) -> Belief:
    """Set a belief as the user states it (source human): effective at once, audited, and later
    automatic extraction does not override it. Refused (409) for a child, or a user without consent."""
    mneme.vocabulary.relation(body.relation)  # 400 naming the vocabulary for a relation it lacks
    reason = mneme.state.policies.get(tenant, user_id).why_no_beliefs()
    if reason:
        raise Conflict(f"no belief can be set for user {user_id!r}: {reason}")
    change = mneme.semantic.correct(tenant, user_id, body.relation, body.object, body.confidence, body.operator_id)
    return out(Belief, next(b for b in mneme.semantic.profile(tenant, user_id) if b.rel_id == change.rel_id))


@router.delete("/v1/users/{user_id}/beliefs/{rel_id}", tags=["semantic memory"])
def delete_belief(tenant: Tenant, mneme: Memory, user_id: PathId, rel_id: PathId,
                  operator_id: OperatorId = "user") -> dict[str, Any]:
    """Delete a belief (source human): out of recall at once, kept with its evidence for audit."""
    change = mneme.semantic.delete(tenant, user_id, rel_id, operator_id)
    if change is None:
        raise NotFound(f"user {user_id!r} has no belief {rel_id!r}")
    return {"deleted": rel_id}


@router.get("/v1/users/{user_id}/beliefs/{rel_id}/history", response_model=BeliefHistory, tags=["semantic memory"])
def history(caller: Caller, mneme: Memory, user_id: PathId, rel_id: PathId) -> BeliefHistory:
    """How one belief's confidence moved over time — each piece of evidence and counter-evidence, corrections,
    re-scores and status changes — and what it decays from (base and half-life). Recorded as read."""
    found = mneme.semantic.history(caller.tenant, user_id, rel_id)
    mneme.reads.listed(caller, user_id, "belief_history", [rel_id])
    return out(BeliefHistory, found)


@router.get("/v1/users/{user_id}/reviews", response_model=list[Review], tags=["semantic memory"])
def reviews(tenant: Tenant, mneme: Memory, user_id: PathId) -> list[Review]:
    """Contradictions waiting for a human: both claims are kept until one is chosen."""
    return out_all(Review, mneme.semantic.reviews.list_open(tenant, user_id))


@router.post("/v1/users/{user_id}/reviews/{review_id}/resolve", response_model=list[Belief],
              tags=["semantic memory"])
def resolve(tenant: Tenant, mneme: Memory, user_id: PathId, review_id: PathId, body: ResolveIn) -> list[Belief]:
    """Keep the claims that are true (confirmed, source human) and delete the rest."""
    mneme.semantic.resolve(tenant, user_id, review_id, body.keep, body.operator_id)
    return out_all(Belief, mneme.semantic.profile(tenant, user_id))
