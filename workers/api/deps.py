"""What every router shares: the runtime, the caller's tenant, the id types of paths and queries, and the
router itself (its bodies read as strict JSON)."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from anyio import from_thread
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memory import page_links
from memory.errors import InvalidInput, NotFound, Unauthorized
from memory.mneme import Mneme
from memory.models import ID_PATTERN, ID_RULE
from memory.purposes import NAME
from memory.services.reads import Reader
from memory.userhash import user_hash
from workers.api.sends import Extractions, Sends
from workers.api.strict_json import StrictJsonRoute

AGENT_HEADER = "X-Mneme-Agent"
log = logging.getLogger(__name__)


async def mneme_of(request: Request) -> Mneme:
    """The Mneme ``create_app`` was built with (``app.state.mneme``). The dependencies are ``async``: FastAPI
    runs a sync one in a worker thread, which costs more than what they do (an API key is one or two Redis
    reads)."""
    mneme: Mneme = request.app.state.mneme
    return mneme


Memory = Annotated[Mneme, Depends(mneme_of)]


async def extractions_of(request: Request) -> Extractions:
    """This process's sender of extraction tasks (``app.state.extractions``)."""
    extractions: Extractions = request.app.state.extractions
    return extractions


ExtractionSends = Annotated[Extractions, Depends(extractions_of)]


#: The two ways to send an API key (``mneme keys create``), declared as the OpenAPI document's security schemes.
BEARER = HTTPBearer(scheme_name="bearer", auto_error=False, description="An API key as `Authorization: Bearer "
                    "<key>`: it picks the tenant. Not needed when the server runs without auth (development).")
KEY_HEADER = APIKeyHeader(name="X-API-Key", scheme_name="apiKey", auto_error=False,
                          description="The same API key in an `X-API-Key` header.")


#: What a memory-page link (``memory.page_links``) may do: its own user's page, and nothing else.
PAGE_ROUTES = frozenset({
    ("GET", "/v1/users/{user_id}/profile"), ("PUT", "/v1/users/{user_id}/beliefs"),
    ("DELETE", "/v1/users/{user_id}/beliefs/{rel_id}"), ("GET", "/v1/users/{user_id}/beliefs/{rel_id}/history"),
    ("GET", "/v1/users/{user_id}/reviews"), ("POST", "/v1/users/{user_id}/reviews/{review_id}/resolve"),
    ("GET", "/v1/users/{user_id}/consent"), ("PUT", "/v1/users/{user_id}/consent"),
    ("PUT", "/v1/users/{user_id}/consent/{purpose}"), ("DELETE", "/v1/users/{user_id}/consent/{purpose}"),
    ("PUT", "/v1/users/{user_id}/child"), ("DELETE", "/v1/users/{user_id}"), ("GET", "/v1/users/{user_id}/export"),
    ("GET", "/v1/users/{user_id}/events"), ("GET", "/v1/users/{user_id}/sessions"),
    ("GET", "/v1/users/{user_id}/reads"), ("GET", "/v1/vocabulary"), ("GET", "/v1/purposes"),
})


async def tenant_of(request: Request, mneme: Memory,
                    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
                    header_key: Annotated[str | None, Depends(KEY_HEADER)]) -> str:
    """The caller's tenant: from the API key, or from a memory-page link (which holds to its user's page), or
    the development tenant when auth is off. Two different keys in one request are refused: which one is meant?"""
    sent = {s for s in (bearer.credentials.strip() if bearer else None, header_key and header_key.strip()) if s}
    if len(sent) > 1 and (mneme.settings.auth_required or any(page_links.is_page_token(s) for s in sent)):
        raise InvalidInput("two different API keys in one request: send one, as 'Authorization: Bearer <key>' "
                           "or as 'X-API-Key: <key>'")
    secret = next(iter(sent), None)
    if page_links.is_page_token(secret):
        return _page_tenant(request, mneme, str(secret))
    if not mneme.settings.auth_required:
        request.state.key_id = "development"
        return mneme.settings.tenant
    key = mneme.state.api_keys.authenticate(secret)
    request.state.key_id = key.key_id  # who reads, for the read audit (``reader_of``)
    return key.tenant


def _page_tenant(request: Request, mneme: Memory, token: str) -> str:
    """The tenant of a memory-page link, on one of the page's routes for the link's own user; 401 or 404 else."""
    grant = page_links.verify(mneme.page_key, token)
    route = getattr(request.scope.get("route"), "path", "")
    if (request.method, route) not in PAGE_ROUTES:
        raise Unauthorized("a memory-page link opens its user's memory page only: use an API key for this")
    if request.path_params.get("user_id", grant.user_id) != grant.user_id:
        raise NotFound("no such user on this memory-page link")  # as another tenant's user: nothing to see
    if mneme.state.policies.erased_after(grant.tenant, grant.user_id, grant.issued_at):
        raise Unauthorized("this memory-page link was revoked: its user's memory was erased")  # nor re-created
    # who read, for the read audit: the user themself, by hashed id (no raw id in an audit record)
    request.state.key_id = f"page:{user_hash(mneme.user_hash_key, grant.tenant, grant.user_id)}"
    return grant.tenant


Tenant = Annotated[str, Depends(tenant_of)]
#: A route's ``dependencies`` when it reads nothing of a tenant's but, with auth on, needs a key all the same.
KEYED = (Depends(tenant_of),)


async def reader_of(request: Request, tenant: Tenant) -> Reader:
    """Who is reading, for the read audit: the tenant, the API key's id, and the agent the caller names in
    ``X-Mneme-Agent`` (optional)."""
    agent = request.headers.get(AGENT_HEADER)
    if agent is not None and not re.fullmatch(ID_PATTERN, agent):
        raise InvalidInput(f"{AGENT_HEADER} names the agent reading: {ID_RULE}")
    audits: Sends[dict[str, Any]] = request.app.state.audits

    def send(records: list[dict[str, Any]]) -> None:  # from the handler's worker thread to the event loop
        try:
            from_thread.run_sync(audits.add, records)
        except Exception:  # noqa: BLE001 - the records are held: the redrive sends them; the read answers
            log.warning("could not send a batch of read records; the redrive will", exc_info=True)

    return Reader(tenant, request.state.key_id, agent, send=send)


Caller = Annotated[Reader, Depends(reader_of)]
PathId = Annotated[str, Path(pattern=ID_PATTERN, description=ID_RULE)]
OperatorId = Annotated[str, Query(pattern=ID_PATTERN, description="Who is acting (the user, a teacher, an agent).")]
PathPurpose = Annotated[str, Path(pattern=NAME.pattern, description="A purpose of this deployment (GET /v1/purposes).")]
QueryPurpose = Annotated[str | None, Query(pattern=NAME.pattern, description="The purpose the read serves: only "
                                           "what was collected under a grant of it. Omitted: any purpose granted.")]


def resource_router() -> APIRouter:
    """A resource's router. Its routes keep their class when the app includes them: every body is strict JSON."""
    return APIRouter(route_class=StrictJsonRoute)
