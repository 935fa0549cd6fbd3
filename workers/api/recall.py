"""Recall: working memory, episodic events and graph facts for a query, each with its provenance."""

from __future__ import annotations

from mneme_client.models import RecallResult

from memory.purposes import checked
from memory.recall import recall
from workers.api.deps import Caller, Memory, resource_router
from workers.api.requests import RecallIn
from workers.api.wire import out

router = resource_router()


@router.post("/v1/recall", response_model=RecallResult, tags=["read"])
def post_recall(caller: Caller, mneme: Memory, body: RecallIn) -> RecallResult:
    """Working memory + episodic events + graph facts for a query, each with its provenance. Naming a
    ``purpose`` returns only what was collected under a grant of it (nothing from long-term memory if the user
    has not granted it: ``degraded``). What it returns is recorded as read by the caller, with the purpose
    (``GET /v1/users/{user_id}/reads``)."""
    if body.purpose is not None:
        checked([body.purpose], mneme.settings.purposes)
    result = recall(mneme, caller.tenant, body.user_id, body.query, body.k, body.session_id, body.event_types,
                    body.include_text, purpose=body.purpose, min_relevance=body.min_relevance)
    mneme.reads.recalled(caller, body.user_id, body.session_id, result.working, result.events, result.facts,
                         purpose=body.purpose)
    return out(RecallResult, result)
