"""What the LLM stage spent and how it failed, per tenant where a tenant's use must not cost the others: tokens
per tenant and UTC day (the daily budget), LLM calls a tenant queued per minute (its share of the LLM queue),
a tenant's pause after the provider asked it to slow down (back-off), and failure counts by reason
(``timeout``, ``http_500``, ``schema``, …)."""

from __future__ import annotations

import redis

from memory.state import keys
from memory.state.client import decoded

TOKENS_TTL_S = 2 * 86_400  # a day's counter outlives the day by one, for late readers
FIRST_PAUSE_S = 2.0  # a tenant's first back-off when the provider names none; each next one doubles


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

    def admit_call(self, tenant: str, limit: int, now: float) -> bool:
        """One more LLM call queued for the tenant this minute, if it has queued fewer than ``limit`` (0: no
        limit)."""
        if limit <= 0:
            return True
        key = keys.llm_calls(tenant, int(now // 60))
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 120)
            return int(pipe.execute()[0]) <= limit

    def paused(self, tenant: str, now: float) -> bool | None:
        """True while the tenant's back-off lasts; False once it is over but not yet cleared by a call that
        succeeded; None when the tenant has none."""
        until = decoded(self._redis.hget(keys.llm_backoff(tenant), "until"))
        return None if until is None else float(until) > now

    def back_off(self, tenant: str, now: float, asked_s: float | None, max_s: float) -> float:
        """The provider asked the tenant's calls to wait (429, 503): none for what it asked (``Retry-After``),
        else twice the tenant's last pause (the first: ``FIRST_PAUSE_S``), at most ``max_s``. Returns it."""
        key = keys.llm_backoff(tenant)
        last = decoded(self._redis.hget(key, "pause"))
        pause = min(max_s, asked_s if asked_s else 2 * float(last) if last else FIRST_PAUSE_S)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"until": now + pause, "pause": pause})
            pipe.expire(key, int(4 * pause) + 1)  # long enough for the next pause to double it
            pipe.execute()
        return pause

    def recovered(self, tenant: str) -> None:
        """A call of the tenant succeeded: its next back-off starts from the first pause again."""
        self._redis.delete(keys.llm_backoff(tenant))

    def count_failure(self, reason: str) -> None:
        self._redis.hincrby(keys.LLM_FAILURES, reason, 1)

    def failures(self) -> dict[str, int]:
        return {reason: int(count) for reason, count in decoded(self._redis.hgetall(keys.LLM_FAILURES)).items()}
