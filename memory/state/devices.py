"""Devices bind to one account: sessions from any of an account's devices share its long-term memory;
a device already bound to another account is refused (an agent mixing up users must not merge them)."""

from __future__ import annotations

import redis

from memory.errors import Conflict
from memory.state import keys
from memory.state.client import decoded


class Devices:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def bind(self, tenant: str, device_id: str, user_id: str) -> None:
        self._redis.hsetnx(keys.devices(tenant), device_id, user_id)
        owner = self._redis.hget(keys.devices(tenant), device_id)
        if owner != user_id:
            raise Conflict(f"device {device_id!r} is bound to another account; send that account's user_id "
                           "or a new device_id")

    # --- the user-data protocol (``memory.userdata``) ---
    name = "devices"

    def of_user(self, tenant: str, user_id: str) -> list[str]:
        return sorted(d for d, owner in decoded(self._redis.hgetall(keys.devices(tenant))).items() if owner == user_id)

    def count(self, tenant: str, user_id: str) -> int:
        return len(self.of_user(tenant, user_id))

    def export(self, tenant: str, user_id: str) -> list[str]:
        return self.of_user(tenant, user_id)

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        bound = self.of_user(tenant, user_id)
        if bound:
            self._redis.hdel(keys.devices(tenant), *bound)
        return {self.name: len(bound)}
