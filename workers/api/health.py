"""``GET /healthz``: whether this process can serve (``GET /metrics`` is :mod:`workers.api.observability`'s)."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from mneme_client.models import Health

from workers.api.deps import Memory, resource_router
from workers.celery_app import QUEUES

router = resource_router()


@router.get("/healthz", response_model=Health, tags=["ops"])
def healthz(mneme: Memory) -> JSONResponse:
    """``ok`` (200) when every backend answers and the query embedder has encoded; ``loading`` (503)
    while it is still loading, so a load balancer sends no recall to a process that cannot answer yet;
    ``degraded`` (503) when a backend is unreachable or a pipeline stage is stalled (``stage:<queue>``:
    its queue has held work, each time it was asked, and none of it finished for ``stage_stall_after_s``)."""
    depths = dict(zip(QUEUES, mneme.state.broker.depths(QUEUES), strict=True))
    stalled = mneme.state.stages.stalled(depths, mneme.settings.stage_stall_after_s)
    backends = mneme.health() | {f"stage:{q}": why for q, why in stalled.items()}
    down = any(v.startswith(("unreachable", "stalled")) for v in backends.values())
    status = "degraded" if down else "loading" if backends["embedder"] == "loading" else "ok"
    return JSONResponse(status_code=200 if status == "ok" else 503,
                        content=Health(status=status, backends=backends).model_dump())
