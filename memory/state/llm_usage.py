"""What the LLM stage spent and how it failed: tokens per tenant and UTC day (the daily budget) and failure
counts by reason (``timeout``, ``http_500``, ``schema``, …)."""

from __future__ import annotations

import redis

from memory.state import keys
from memory.state.client import decoded

TOKENS_TTL_S = 2 * 86_400  # a day's counter outlives the day by one, for late readers


class LLMUsage:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def spent(self, tenant: str, day: str) -> int:
        return int(self._redis.get(keys.llm_tokens(tenant, day)) or 0)

    def spend(self, tenant: str, day: str, tokens: int) -> None:
        key = keys.llm_tokens(tenant, day)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrby(key, tokens)
            pipe.expire(key, TOKENS_TTL_S)
            pipe.execute()

    def count_failure(self, reason: str) -> None:
        self._redis.hincrby(keys.LLM_FAILURES, reason, 1)

    def failures(self) -> dict[str, int]:
        return {reason: int(count) for reason, count in decoded(self._redis.hgetall(keys.LLM_FAILURES)).items()}
