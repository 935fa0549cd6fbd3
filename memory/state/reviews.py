"""The review queue: contradictions the pipeline will not settle on its own ("I like X" then "I can't
stand X"; two devices claiming different ages; a device claiming another age than a human set). Both
claims stay in the graph — for a single-valued relation the newcomer waits ``in_review``, out of recall —
and a human (or an agent on the user's behalf) resolves the review through the API. Reviews live in
Redis (AOF)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import redis
from pydantic import BaseModel

from memory.errors import Conflict, NotFound
from memory.state import keys
from memory.state.client import members

RESOLVED_TTL_S = 90 * 86400


class Claim(BaseModel):
    rel_id: str
    relation: str
    object: str
    confidence: float
    devices: list[str]


class Review(BaseModel):
    review_id: str
    tenant: str
    user_id: str
    kind: str  # "contradiction" | "cross_device" | "human_correction" | "less_sure"
    claims: list[Claim]
    evidence_id: str
    created_at: float
    status: str = "open"
    kept: list[str] | None = None
    resolved_by: str | None = None


class Reviews:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def open(self, tenant: str, user_id: str, kind: str, claims: list[Claim], evidence_id: str) -> Review:
        """Open a review once per triggering evidence: a redelivered task finds the same review."""
        rel_ids = sorted(c.rel_id for c in claims)
        digest = hashlib.sha256("\x1f".join([tenant, user_id, evidence_id, *rel_ids]).encode())
        review = Review(review_id="rv_" + digest.hexdigest()[:20], tenant=tenant, user_id=user_id, kind=kind,
                        claims=claims, evidence_id=evidence_id, created_at=time.time())
        if self._redis.hsetnx(keys.review(tenant, review.review_id), "json", review.model_dump_json()):
            self._redis.zadd(keys.reviews(tenant, user_id), {review.review_id: review.created_at})
        return self.get(tenant, user_id, review.review_id)

    def get(self, tenant: str, user_id: str, review_id: str) -> Review:
        review = self._load(tenant, review_id)
        if review is None or review.user_id != user_id:
            raise NotFound(f"no review {review_id!r} for user {user_id!r}")
        return review

    def list_open(self, tenant: str, user_id: str) -> list[Review]:
        ids = members(self._redis.zrange(keys.reviews(tenant, user_id), 0, -1))
        found = [self._load(tenant, review_id) for review_id in ids]
        return [r for r in found if r is not None and r.status == "open"]

    def _load(self, tenant: str, review_id: str) -> Review | None:
        raw = self._redis.hget(keys.review(tenant, review_id), "json")
        return Review.model_validate_json(raw) if raw else None

    def close(self, review: Review, kept: list[str], operator_id: str) -> Review:
        if review.status != "open":
            raise Conflict(f"review {review.review_id} was already resolved (kept {review.kept})")
        done = review.model_copy(update={"status": "resolved", "kept": kept, "resolved_by": operator_id})
        pipe = self._redis.pipeline()
        pipe.hset(keys.review(review.tenant, review.review_id), "json", done.model_dump_json())
        pipe.expire(keys.review(review.tenant, review.review_id), RESOLVED_TTL_S)
        pipe.execute()
        return done

    # --- the user-data protocol (``memory.userdata``): reviews hold the claims' text ---
    name = "reviews"

    def count(self, tenant: str, user_id: str) -> int:
        return int(self._redis.zcard(keys.reviews(tenant, user_id)))

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        found = [self._load(tenant, r) for r in members(self._redis.zrange(keys.reviews(tenant, user_id), 0, -1))]
        return [r.model_dump(mode="json") for r in found if r is not None]  # None: resolved long ago, expired

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        review_ids = members(self._redis.zrange(keys.reviews(tenant, user_id), 0, -1))
        self._redis.delete(*(keys.review(tenant, r) for r in review_ids), keys.reviews(tenant, user_id))
        return {self.name: len(review_ids)}
