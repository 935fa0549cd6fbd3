"""The Redis client and the one translation of its errors.

A connection that fails, times out or finds the server still loading its data is a ``TransientError``
(503 in the API, retried by tasks), raised by the client itself — from a command, a pipeline or a script —
so no repository wraps its calls. Any other Redis error (a script error, a wrong type) is a bug and stays
what it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.client import Pipeline

from memory.errors import TransientError

REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)
RedisFailure = redis.RedisError  # any other failure of Redis (the API answers 503 for it too)


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except REDIS_ERRORS as exc:
        raise TransientError(f"Redis unavailable: {exc}") from exc


class _Pipeline(Pipeline):
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translated():
            return super().execute(raise_on_error)


class StateClient(redis.Redis):
    """``redis.Redis`` (text replies) whose unavailability is a ``TransientError``."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        with translated():
            return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> _Pipeline:
        return _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def connect(url: str) -> StateClient:
    return StateClient.from_url(url, decode_responses=True, socket_timeout=10, socket_connect_timeout=5,
                                health_check_interval=30)
