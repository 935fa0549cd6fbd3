"""Which LoRA query adapter is published: every process switches to it within seconds (``Mneme``)."""

from __future__ import annotations

import redis

from memory.state import keys
from memory.state.client import decoded


class PublishedAdapter:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def current(self) -> str | None:
        return decoded(self._redis.get(keys.ADAPTER_CURRENT))

    def publish(self, version: str) -> None:
        self._redis.set(keys.ADAPTER_CURRENT, version)
