"""The Redis client and the one translation of its errors.

A connection that fails, times out or finds the server still loading its data is a ``TransientError``
(503 in the API, retried by tasks), raised by the client itself — from a command, a pipeline or a script —
so no repository wraps its calls. Any other Redis error (a script error, a wrong type) is a bug and stays
what it is.

redis-py types a reply ``bytes | str`` whatever the client, as it cannot know ``decode_responses``. Every client
of this package decodes (``connect``; a test builds its own with ``decode_responses=True``), so a reply is text:
``decoded``, ``members`` and ``scored`` say so to the type checker, and convert nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast, overload

import redis
from redis.client import Pipeline
from redis.typing import ZSetRangeResponse

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
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # unannotated upstream

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> _Pipeline:
        return _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def connect(url: str) -> StateClient:
    # redis-py's ``from_url`` builds ``cls`` but is annotated as returning ``Redis``
    return StateClient.from_url(url, decode_responses=True, socket_timeout=10,  # type: ignore[return-value]
                                socket_connect_timeout=5, health_check_interval=30)


@overload
def decoded(reply: dict[bytes | str, bytes | str]) -> dict[str, str]: ...
@overload
def decoded(reply: set[bytes | str]) -> set[str]: ...
@overload
def decoded(reply: list[bytes | str]) -> list[str]: ...
@overload
def decoded(reply: bytes | str | None) -> str | None: ...
def decoded(reply: object) -> object:
    """A reply of a decoding client as the text it is (a hash, a set, a list, one value or none)."""
    return reply


def members(reply: ZSetRangeResponse) -> list[str]:
    """A sorted set's members as read without their scores (``ZRANGE``, ``ZRANGEBYSCORE``)."""
    return cast(list[str], reply)


def scored(reply: ZSetRangeResponse) -> list[tuple[str, float]]:
    """(member, score) pairs as read ``withscores=True``."""
    return cast(list[tuple[str, float]], reply)
