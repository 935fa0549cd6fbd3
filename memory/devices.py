"""Devices bind to one account: sessions from any of an account's devices share its long-term memory;
a device already bound to another account is refused (an agent mixing up users must not merge them)."""

from __future__ import annotations

import redis

from memory import keys
from memory.errors import Conflict, TransientError
from memory.working import REDIS_ERRORS


class Devices:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def bind(self, tenant: str, device_id: str, user_id: str) -> None:
        try:
            self._redis.hsetnx(keys.devices(tenant), device_id, user_id)
            owner = self._redis.hget(keys.devices(tenant), device_id)
        except REDIS_ERRORS as exc:
            raise TransientError(f"device registry unavailable: {exc}") from exc
        if owner != user_id:
            raise Conflict(f"device {device_id!r} is bound to another account; send that account's user_id "
                           "or a new device_id")
