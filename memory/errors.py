"""The one error tree. The HTTP layer maps each branch to a status; tasks retry only ``TransientError``.

    MnemeError
    ├── InvalidInput            400  the request is well-formed JSON but says something we cannot accept
    ├── Unauthorized            401  no API key, or an unknown or revoked one
    ├── NotFound                404  no such session / version / job / message (or another tenant's)
    ├── Conflict                409  an id is reused with other content, or a session has another owner
    ├── RateLimited             429  the API key's requests-per-minute are used up, or the tenant's line is full
    ├── ConfigurationError      500  bad settings, unknown backend scheme, missing extra
    └── TransientError          503  a backend is unreachable or busy; safe to retry
"""

from __future__ import annotations

from pydantic import ValidationError


class MnemeError(Exception):
    """Base of every error Mneme raises on purpose."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(MnemeError):
    status = 400
    code = "invalid_input"


class Unauthorized(MnemeError):
    status = 401
    code = "unauthorized"


class RateLimited(MnemeError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s  # answered as ``Retry-After``


class NotFound(MnemeError):
    status = 404
    code = "not_found"


class Conflict(MnemeError):
    status = 409
    code = "conflict"


class ConfigurationError(MnemeError):
    status = 500
    code = "configuration_error"


class TransientError(MnemeError):
    status = 503
    code = "backend_unavailable"


def described(exc: BaseException) -> str:
    """An error as it may be written down (a job's error, a dead letter, a log line): a validation error
    names the fields and what is wrong with them, never the values (they may be a user's words)."""
    if isinstance(exc, ValidationError):
        problems = exc.errors(include_input=False, include_url=False, include_context=False)
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in problems]
        return f"{len(problems)} validation error(s) for {exc.title}: " + "; ".join(parts)
    return str(exc)
