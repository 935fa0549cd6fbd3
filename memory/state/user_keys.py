"""The Redis-backed key store (``memory.keystore``): users' wrapped data keys in one hash per tenant, so every
process of a distributed deployment sees the same keys. Wrapped keys are sealed under the master key: a copy
of Redis without the master key opens nothing. Erasure rewrites the append-only file after deleting one."""

from __future__ import annotations

import base64

from memory.settings import Settings
from memory.state import keys
from memory.state.client import StateClient, connect


class RedisKeyStore:
    def __init__(self, client: StateClient) -> None:
        self._redis = client

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> RedisKeyStore:
        return cls(connect(url))

    def put_if_absent(self, tenant: str, user_id: str, wrapped: bytes) -> bytes:
        pipe = self._redis.pipeline()
        pipe.hsetnx(keys.user_keys(tenant), user_id, base64.b64encode(wrapped).decode())
        pipe.hget(keys.user_keys(tenant), user_id)
        return base64.b64decode(pipe.execute()[1])

    def get(self, tenant: str, user_id: str) -> bytes | None:
        raw = self._redis.hget(keys.user_keys(tenant), user_id)
        return base64.b64decode(raw) if raw is not None else None

    def delete(self, tenant: str, user_id: str) -> bool:
        return bool(self._redis.hdel(keys.user_keys(tenant), user_id))

    def ping(self) -> None:
        self._redis.ping()
