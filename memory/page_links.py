"""Links to a user's memory page (记忆透明度): a credential that lets one person see and correct what the agent
believes about them — and nothing else.

An agent's backend, holding its tenant's API key, asks for a link for one of its users
(``POST /v1/users/{id}/page-link``); the link carries a token bound to that tenant, that user and an expiry,
signed with HMAC-SHA256 under a key derived from the master key (no secret to configure; a new master key
voids every link). The page sends the token as its bearer credential, and the API accepts it only on the
memory page's own routes and only for that user (``workers.api.deps``). The token rides in the URL's fragment
(``/memory#token=…``), which browsers never send to a server, so it is in no access log.

``mp1.<base64url(tenant \\x1f user \\x1f expiry)>.<base64url(hmac)>``
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

from memory.errors import Unauthorized

PREFIX = "mp1."
PURPOSE = b"mneme memory page v1"


def page_key(master: bytes) -> bytes:
    return hmac.new(master, PURPOSE, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


MAX_TTL_S = 7 * 86400  # the longest a link may work: an erasure's tombstone is kept at least this long


@dataclass(frozen=True)
class PageGrant:
    """What a valid token lets its holder do: see and correct one user's memory in one tenant, until then."""

    tenant: str
    user_id: str
    expires_at: float
    issued_at: float  # an erasure after it revokes the link (``workers.api.deps``)


def issue(key: bytes, tenant: str, user_id: str, ttl_s: float, now: float | None = None) -> tuple[str, float]:
    """A token for the user's page, and when it expires."""
    issued = time.time() if now is None else now
    expires = round(issued + ttl_s)
    body = _b64(f"{tenant}\x1f{user_id}\x1f{expires}\x1f{issued:.3f}".encode())
    return f"{PREFIX}{body}.{_b64(hmac.new(key, body.encode(), hashlib.sha256).digest())}", float(expires)


def is_page_token(secret: str | None) -> bool:
    return bool(secret) and secret.startswith(PREFIX)  # type: ignore[union-attr]  # bool(None) is False


def verify(key: bytes, token: str, now: float | None = None) -> PageGrant:
    """The grant a token carries; ``Unauthorized`` for a forged, malformed or expired one."""
    try:
        body, signature = token.removeprefix(PREFIX).split(".")
        expected = hmac.new(key, body.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(_unb64(signature), expected):
            raise ValueError("bad signature")
        tenant, user_id, expires, issued = _unb64(body).decode().split("\x1f")
    except (ValueError, UnicodeDecodeError):
        raise Unauthorized("this memory-page link is not valid: ask the app for a new one") from None
    if float(expires) < (time.time() if now is None else now):
        raise Unauthorized("this memory-page link has expired: ask the app for a new one")
    return PageGrant(tenant, user_id, float(expires), float(issued))
