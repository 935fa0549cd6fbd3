"""What a call can fail with. Every answer of the API that is not a success is a ``MnemeAPIError`` carrying its
status, the API's error code and its message (which says what to change); each status the API documents has
its own class, so a caller catches what it can handle::

    MnemeError
    ├── MnemeAPIError            the API answered with an error (.status, .error, .message)
    │   ├── InvalidRequest       400, 422: the request says something that cannot be accepted
    │   ├── Unauthorized         401: no API key, or an unknown or revoked one
    │   ├── NotFound             404
    │   ├── Conflict             409
    │   ├── RateLimited          429: retried with backoff first (Retry-After), raised when retries ran out
    │   └── Unavailable          503: retried the same way
    └── ConnectionFailed         the API could not be reached (retried like a 503)
"""

from __future__ import annotations


class MnemeError(Exception):
    """Base of every error the client raises."""


class MnemeAPIError(MnemeError):
    def __init__(self, status: int, error: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {error}: {message}")
        self.status, self.error, self.message, self.retry_after = status, error, message, retry_after


class InvalidRequest(MnemeAPIError):
    pass


class Unauthorized(MnemeAPIError):
    pass


class NotFound(MnemeAPIError):
    pass


class Conflict(MnemeAPIError):
    pass


class RateLimited(MnemeAPIError):
    pass


class Unavailable(MnemeAPIError):
    pass


class ConnectionFailed(MnemeError):
    pass


BY_STATUS: dict[int, type[MnemeAPIError]] = {400: InvalidRequest, 422: InvalidRequest, 401: Unauthorized,
                                              404: NotFound, 409: Conflict, 429: RateLimited, 503: Unavailable}


def api_error(status: int, error: str, message: str, retry_after: float | None) -> MnemeAPIError:
    return BY_STATUS.get(status, MnemeAPIError)(status, error, message, retry_after)
