"""Tenants and API keys. A key maps a caller to one tenant; every read and write is scoped by it.

Keys are ``mn_<key id>_<secret>``; only the SHA-256 of the whole key is stored, so a leaked database
gives no usable key. Each key has a per-minute rate limit: a sliding window in Redis (``ratelimit.lua``), so
no 60 s, wherever they start, let more requests through than the limit.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import time
from collections.abc import Callable

import redis
from pydantic import BaseModel

from memory.errors import InvalidInput, NotFound, RateLimited, Unauthorized
from memory.models import TENANT_PATTERN, TENANT_RULE
from memory.state import keys
from memory.state.lua import script

RATE_WINDOW_S = 60
_TAKE = script("ratelimit.lua", entry="return rate_take(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])")


class ApiKey(BaseModel):
    key_id: str
    tenant: str
    name: str
    rate_limit: int  # requests per minute; 0 = unlimited
    created_at: float


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeys:
    """Tenants' API keys and their rate limits."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self._clock = clock  # what the rate window is measured with
        self._take = client.register_script(_TAKE)

    def create_key(self, tenant: str, name: str = "", rate_limit: int = 600) -> tuple[str, str]:
        """A new key for ``tenant``: returns (key id, the secret key — shown once, never stored)."""
        if not re.fullmatch(TENANT_PATTERN, tenant):
            raise InvalidInput(f"a tenant name is {TENANT_RULE}")
        key_id = secrets.token_hex(6)
        secret = f"mn_{key_id}_{secrets.token_urlsafe(24)}"
        record = ApiKey(key_id=key_id, tenant=tenant, name=name, rate_limit=rate_limit, created_at=time.time())
        pipe = self._redis.pipeline()
        pipe.hset(keys.API_KEYS, key_id, record.model_dump_json())
        pipe.hset(keys.API_KEY_HASHES, _digest(secret), key_id)
        pipe.execute()
        return key_id, secret

    def list_keys(self) -> list[ApiKey]:
        return sorted((ApiKey.model_validate_json(v) for v in self._redis.hvals(keys.API_KEYS)),
                      key=lambda k: (k.tenant, k.created_at))

    def revoke_key(self, key_id: str) -> None:
        if not self._redis.hexists(keys.API_KEYS, key_id):
            raise NotFound(f"no API key {key_id!r}")
        hashes = [h for h, k in self._redis.hgetall(keys.API_KEY_HASHES).items() if k == key_id]
        pipe = self._redis.pipeline()
        pipe.hdel(keys.API_KEYS, key_id)
        if hashes:
            pipe.hdel(keys.API_KEY_HASHES, *hashes)
        pipe.execute()

    def authenticate(self, secret: str | None) -> ApiKey:
        """The key behind ``secret``, after charging one request to its rate limit."""
        if not secret:
            raise Unauthorized("send your API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
        key_id = self._redis.hget(keys.API_KEY_HASHES, _digest(secret))
        raw = self._redis.hget(keys.API_KEYS, key_id) if key_id else None
        if raw is None:
            raise Unauthorized("unknown or revoked API key")
        key = ApiKey.model_validate_json(raw)
        if key.rate_limit:
            wait_ms = int(self._take(keys=[keys.rate_window(key.key_id)], args=[
                round(self._clock() * 1000), RATE_WINDOW_S * 1000, key.rate_limit, secrets.token_hex(8)]))
            if wait_ms:
                wait = math.ceil(wait_ms / 1000)
                raise RateLimited(f"API key {key.key_id} is limited to {key.rate_limit} requests a minute; "
                                  f"retry in {wait} s", retry_after_s=wait)
        return key
