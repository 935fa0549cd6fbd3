"""Feedback on what recall returned, and the product metrics computed from stored data."""

from __future__ import annotations

from mneme_client.models import FeedbackResult, Metrics

from memory import feedback as library
from memory.feedback import FeedbackIn
from workers.api.deps import Memory, Tenant, resource_router
from workers.api.wire import out

router = resource_router()


@router.post("/v1/feedback", response_model=FeedbackResult, tags=["feedback"])
def post_feedback(tenant: Tenant, mneme: Memory, body: FeedbackIn) -> FeedbackResult:
    """Was a recalled event or belief useful? Moves its retrieval weight; feeds the interference rate."""
    return out(FeedbackResult, library.give(mneme, tenant, body))


@router.get("/v1/metrics/product", response_model=Metrics, tags=["ops"])
def product_metrics(tenant: Tenant, mneme: Memory) -> Metrics:
    """Session depth, cross-session retention, task success rate, memory interference rate."""
    return out(Metrics, library.metrics(mneme, tenant))
