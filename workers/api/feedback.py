"""Feedback on what recall returned, and the product metrics computed from stored data."""

from __future__ import annotations

from memory import feedback as library
from memory.audit import graph_write_record
from memory.feedback import FeedbackIn
from workers.api.deps import Rt, Tenant, resource_router
from workers.schemas import FeedbackResult, Metrics

router = resource_router()


@router.post("/v1/feedback", response_model=FeedbackResult, tags=["feedback"])
def post_feedback(tenant: Tenant, rt: Rt, body: FeedbackIn) -> FeedbackResult:
    """Was a recalled event or belief useful? Moves its retrieval weight; feeds the interference rate."""
    result, change = library.give(rt, tenant, body)
    if change is not None:
        rt.audit.write([graph_write_record(rt.user_hash_key, change, operator_id=body.operator_id)])
    return result


@router.get("/v1/metrics/product", response_model=Metrics, tags=["ops"])
def product_metrics(tenant: Tenant, rt: Rt) -> Metrics:
    """Session depth, cross-session retention, task success rate, memory interference rate."""
    return library.metrics(rt, tenant)
