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

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast, overload

import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.exceptions import ClusterDownError, ClusterError, NoScriptError, TryAgainError
from redis.retry import Retry
from redis.typing import ZSetRangeResponse

from memory.errors import TransientError

# a cluster mid-failover answers CLUSTERDOWN or TRYAGAIN, or runs out of redirections: all pass
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, ClusterDownError, TryAgainError,
                ClusterError)
RedisFailure = redis.RedisError  # any other failure of Redis (the API answers 503 for it too)


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except REDIS_ERRORS as exc:
        raise TransientError(f"Redis unavailable: {exc}") from exc


class Breaker:
    """A Redis that did not answer within the client's timeout is not asked again for ``OPEN_S``: every command
    meanwhile fails at once (``TransientError``; the API answers 503 with Retry-After) instead of waiting out a
    timeout of its own — requests queued behind a frozen Redis fail fast, they do not pile up."""

    OPEN_S = 1.0

    def __init__(self) -> None:
        self.open_until = 0.0

    @contextmanager
    def guarded(self) -> Iterator[None]:
        if time.monotonic() < self.open_until:
            raise TransientError("Redis did not answer a moment ago: retry in a second")
        try:
            with translated():
                yield
        except TransientError as exc:
            if isinstance(exc.__cause__, redis.TimeoutError):
                self.open_until = time.monotonic() + self.OPEN_S
            raise


class _Pipeline(Pipeline):
    breaker: Breaker

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        with self.breaker.guarded():
            return super().execute(raise_on_error)


class StateClient(redis.Redis):
    """``redis.Redis`` (text replies) whose unavailability is a ``TransientError``, behind a ``Breaker``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.breaker = Breaker()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        with self.breaker.guarded():
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # unannotated upstream

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> _Pipeline:
        pipe = _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.breaker = self.breaker
        return pipe


class StateCluster(RedisCluster):
    """``RedisCluster`` (text replies) whose unavailability is a ``TransientError`` too, and whose scripts are on
    every primary: loaded there when registered, and again when a node says it lacks one (a replica promoted
    by a failover starts with no scripts). A pipeline that met a missing script fails as transient once the
    scripts are back, and its caller's retry runs it (every pipelined step here is idempotent)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scripts: list[Script] = []

    def register_script(self, script: Any) -> Script:
        registered = Script(self, script)
        self._scripts.append(registered)
        self._load_scripts([registered])
        return registered

    def _load_scripts(self, scripts: list[Script], refresh: bool = False) -> None:
        """Load ``scripts`` on every primary; with ``refresh``, after reading the topology again first (a
        node said it lacks one: a failover promoted a replica, which the cached topology may not know yet)."""
        with translated():
            if refresh:
                self.nodes_manager.initialize()
            for node in self.get_primaries():  # type: ignore[no-untyped-call]  # unannotated upstream
                connection = self.get_redis_connection(node)
                for registered in scripts:
                    connection.script_load(registered.script)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        with translated():
            try:
                return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # unannotated
            except NoScriptError:
                self._load_scripts(self._scripts, refresh=True)
                return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> _ClusterPipeline:
        return _ClusterPipeline(
            self, nodes_manager=self.nodes_manager, commands_parser=self.commands_parser,
            startup_nodes=self.nodes_manager.startup_nodes, result_callbacks=self.result_callbacks,
            cluster_response_callbacks=self.cluster_response_callbacks, read_from_replicas=self.read_from_replicas,
            load_balancing_strategy=self.load_balancing_strategy, reinitialize_steps=self.reinitialize_steps,
            retry=self.retry, lock=self._lock, transaction=transaction, event_dispatcher=self._event_dispatcher)


class _ClusterPipeline(ClusterPipeline):
    def __init__(self, owner: StateCluster, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._owner = owner

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Pipelined like any command, sent to the node of its first key. redis-py blocks it in a cluster
        pipeline because a script may reach keys of other slots; each of Mneme's keeps to its first key's
        (one hash tag), and the node refuses one that does not (CROSSSLOT)."""
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)  # type: ignore[no-untyped-call]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translated():
            try:
                return super().execute(raise_on_error)
            except NoScriptError as exc:
                self._owner._load_scripts(self._owner._scripts, refresh=True)
                raise TransientError("a Redis node had lost Mneme's scripts (a failover); they are loaded again: "
                                     "retry") from exc


def connect(url: str, cluster: bool = False, timeout_s: float = 10.0) -> StateClient:
    """A client of the Redis at ``url``; with ``cluster``, of the Redis Cluster that node belongs to (typed as
    the one-node client: the commands Mneme uses are the same, routed by key). A command not answered within
    ``timeout_s`` fails at once (a frozen Redis is not waited on, nor asked again); a connection refused or
    dropped is tried once more (a restarted Redis leaves the pool's sockets dead)."""
    options: dict[str, Any] = {"decode_responses": True, "socket_timeout": timeout_s,
                               "socket_connect_timeout": timeout_s}
    if cluster:
        return cast(StateClient, StateCluster.from_url(url, **options))
    once_more = Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
    # redis-py's ``from_url`` builds ``cls`` but is annotated as returning ``Redis``
    return StateClient.from_url(url, health_check_interval=30, retry=once_more,  # type: ignore[return-value]
                                **options)


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
