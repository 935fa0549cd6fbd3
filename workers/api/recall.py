"""Recall: working memory, episodic events and graph facts for a query, each with its provenance."""

from __future__ import annotations

from memory.recall import recall
from workers.api.deps import Memory, Tenant, resource_router
from workers.api.requests import RecallIn
from workers.api.wire import out
from workers.schemas import RecallResult

router = resource_router()


@router.post("/v1/recall", response_model=RecallResult, tags=["read"])
def post_recall(tenant: Tenant, mneme: Memory, body: RecallIn) -> RecallResult:
    """Working memory + episodic events + graph facts for a query, each with its provenance."""
    return out(RecallResult, recall(mneme, tenant, body.user_id, body.query, body.k, body.session_id,
                                    body.event_types, body.include_text))
