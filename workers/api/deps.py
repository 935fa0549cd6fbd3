"""What every router shares: the runtime, the caller's tenant, the id types of paths and queries, and the
router itself (its bodies read as strict JSON)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from memory.mneme import Mneme
from memory.models import ID_PATTERN, ID_RULE
from workers.api.extractions import ExtractionSends
from workers.api.strict_json import StrictJsonRoute


async def mneme_of(request: Request) -> Mneme:
    """The Mneme ``create_app`` was built with (``app.state.mneme``). The dependencies are ``async``: FastAPI
    runs a sync one in a worker thread, which costs more than what they do (an API key is one or two Redis
    reads)."""
    mneme: Mneme = request.app.state.mneme
    return mneme


Memory = Annotated[Mneme, Depends(mneme_of)]


async def extractions_of(request: Request) -> ExtractionSends:
    """This process's sender of extraction tasks (``app.state.extractions``)."""
    extractions: ExtractionSends = request.app.state.extractions
    return extractions


Extractions = Annotated[ExtractionSends, Depends(extractions_of)]


async def tenant_of(request: Request, mneme: Memory) -> str:
    """The caller's tenant: from the API key, or the development tenant when auth is off."""
    if not mneme.settings.auth_required:
        return mneme.settings.tenant
    header = request.headers.get("authorization", "")
    secret = header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("x-api-key")
    return mneme.state.api_keys.authenticate(secret).tenant


Tenant = Annotated[str, Depends(tenant_of)]
PathId = Annotated[str, Path(pattern=ID_PATTERN, description=ID_RULE)]
OperatorId = Annotated[str, Query(pattern=ID_PATTERN, description="Who is acting (the user, a teacher, an agent).")]


def resource_router() -> APIRouter:
    """A resource's router. Its routes keep their class when the app includes them: every body is strict JSON."""
    return APIRouter(route_class=StrictJsonRoute)
