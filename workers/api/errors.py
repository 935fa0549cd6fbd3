"""How the API answers an error: always ``ErrorBody`` (``{"error", "message"}``, and ``details`` for a 422).

- a library error (``memory.errors.MnemeError``): its own status and code;
- a routing or parsing error (no such route, wrong method, a body that is not JSON): its status, our shape;
- Redis unreachable: 503 ``backend_unavailable``;
- an invalid request: 422 ``invalid_request``, each problem named by field, never echoing the input.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mneme_client.models import ErrorBody
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory.errors import MnemeError, RateLimited, TransientError
from memory.state.client import RedisFailure
from workers.api.strict_json import problem

_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
#: Documented on every route: what each status means here.
RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The request says something that cannot be accepted; the message says "
                                             "what to change."},
    401: {"model": ErrorBody, "description": "No API key, or an unknown or revoked one (with auth on)."},
    404: {"model": ErrorBody, "description": "No such session, version, message, job or belief (or another "
                                             "tenant's)."},
    409: {"model": ErrorBody, "description": "Conflicts with what is held: an id reused with other content, a "
                                             "session of another user, a state that does not allow it."},
    422: {"model": ErrorBody, "description": "The body or a parameter is malformed; `details` names each field."},
    429: {"model": ErrorBody, "headers": _RETRY_AFTER,
          "description": "The API key's requests a minute are used up, or the tenant's line is full: retry after "
                         "`Retry-After` seconds."},
    503: {"model": ErrorBody, "headers": _RETRY_AFTER,
          "description": "A backend is unreachable or busy (nothing accepted was lost): retry."},
}


UNAVAILABLE_RETRY_S = 1  # a 503's Retry-After: a backend that is down is usually back within seconds


async def mneme_error(request: Request, exc: MnemeError) -> JSONResponse:
    headers = ({"Retry-After": str(exc.retry_after_s)} if isinstance(exc, RateLimited)
               else {"Retry-After": str(UNAVAILABLE_RETRY_S)} if isinstance(exc, TransientError) else None)
    return JSONResponse(status_code=exc.status, headers=headers, content={"error": exc.code, "message": exc.message})


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    codes = {404: "not_found", 405: "method_not_allowed", 400: "invalid_request"}
    return JSONResponse(status_code=exc.status_code, headers=getattr(exc, "headers", None), content={
        "error": codes.get(exc.status_code, "http_error"), "message": str(exc.detail)})


async def redis_down(request: Request, exc: RedisFailure) -> JSONResponse:
    return JSONResponse(status_code=503, headers={"Retry-After": str(UNAVAILABLE_RETRY_S)}, content={
        "error": "backend_unavailable", "message": f"working memory unavailable: {exc}"})


async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [problem(e) for e in exc.errors()]
    return JSONResponse(status_code=422, content={
        "error": "invalid_request", "message": "; ".join(f"{p['field']}: {p['msg']}" for p in problems),
        "details": problems,
    })


Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]
HANDLERS: dict[int | type[Exception], Handler] = {
    MnemeError: mneme_error, StarletteHTTPException: http_error, RedisFailure: redis_down,
    RequestValidationError: invalid,
}
