"""Recall: working memory, episodic events and graph facts for a query, each with its provenance."""

from __future__ import annotations

from memory.recall import recall
from workers.api.deps import Rt, Tenant, resource_router
from workers.api.requests import RecallIn
from workers.schemas import RecallResult

router = resource_router()


@router.post("/v1/recall", response_model=RecallResult, tags=["read"])
def post_recall(tenant: Tenant, rt: Rt, body: RecallIn) -> RecallResult:
    """Working memory + episodic events + graph facts for a query, each with its provenance."""
    return recall(rt, tenant, body.user_id, body.query, body.k, body.session_id, body.event_types,
                  body.include_text)
