"""What the Celery broker (kombu's Redis transport) holds, read for metrics, ``/healthz`` and the redrive.

Each queue is a list, with one more per priority step (``<queue>\\x06\\x16<p>``); messages are protocol-2 JSON
whose body is ``[args, kwargs, embed]``, base64-encoded unless ``tasks.envelope`` built it. A worker's
unacknowledged messages (running, prefetched, buffered for a batch, waiting for a retry's countdown) wait in
a hash of its own until the ack (``unacked:<node>``, :func:`node_keys`; every node that held any is listed in
``NODES``): a worker started again under its name puts back at once what its previous run held
(``tasks.lifecycle``), and the redrive puts back what a node that never returned held longer than the
visibility timeout. ``unacked``, kombu's shared default, is read too (a worker of an older release).
A consuming worker beats every ``BEAT_S`` (``CONSUMING``): what ``mneme status``, the workers' healthcheck and
the redrive go by — a worker that answers a ping but takes no work is not consuming.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis

from memory.state import keys
from memory.state.client import decoded

UNACKED = "unacked"  # kombu's default ``unacked_key``
NODES = "mneme:broker:nodes"  # the worker nodes that hold (or held) messages in hashes of their own
CONSUMING = "mneme:broker:consuming"  # worker node → when its consumer last beat (connected, its loop running)
BEAT_S = 5.0  # a consuming worker beats this often
PRIORITY_LISTS = ("", "\x06\x163", "\x06\x166", "\x06\x169")  # kombu's ``sep`` and steps; 0 is the bare name
PAGE = 1000


class Broker:
    """``client`` is the broker's Redis; ``state`` the state's, where the dead letters wait (the same unless
    the state is a cluster)."""

    def __init__(self, client: redis.Redis, state: redis.Redis | None = None) -> None:
        self._redis = client
        self._state = state or client

    def depths(self, queues: Sequence[str]) -> list[int]:
        """Messages waiting in each queue (all its priority lists)."""
        pipe = self._redis.pipeline(transaction=False)
        for queue in queues:
            for suffix in PRIORITY_LISTS:
                pipe.llen(queue + suffix)
        counts = pipe.execute()
        step = len(PRIORITY_LISTS)
        return [sum(counts[i * step:(i + 1) * step]) for i in range(len(queues))]

    def dead_letters(self) -> int:
        """Tasks waiting in the dead-letter list."""
        return int(self._state.llen(keys.DEAD_LETTERS))

    def in_flight(self) -> int:
        """Messages workers hold unacknowledged."""
        pipe = self._redis.pipeline(transaction=False)
        for key in self.unacked_keys():
            pipe.hlen(key)
        return sum(pipe.execute())

    def register(self, node: str) -> None:
        """Note that worker ``node`` holds its messages in :func:`node_keys`' hashes."""
        self._redis.sadd(NODES, node)

    def nodes(self) -> list[str]:
        return sorted(decoded(self._redis.smembers(NODES)))

    def beat(self, node: str, now: float | None = None) -> None:
        """Worker ``node`` consumes: its consumer is connected and its loop runs (it takes and finishes work)."""
        self._redis.hset(CONSUMING, node, time.time() if now is None else now)

    def left(self, node: str) -> None:
        """Worker ``node`` stopped on purpose: it is not expected to consume any more."""
        self._redis.hdel(CONSUMING, node)

    def silent(self, after_s: float, now: float | None = None) -> dict[str, float]:
        """The worker nodes that beat once but not for ``after_s``: node → seconds since their last beat (a
        worker that died, froze, lost its broker connection for good, or runs one task that long)."""
        now = time.time() if now is None else now
        beats = {node: float(at) for node, at in decoded(self._redis.hgetall(CONSUMING)).items()}
        return {node: now - at for node, at in beats.items() if now - at > after_s}

    def consuming(self, within_s: float, now: float | None = None) -> list[str]:
        """The worker nodes that beat within ``within_s``."""
        now = time.time() if now is None else now
        return sorted(node for node, at in decoded(self._redis.hgetall(CONSUMING)).items()
                      if now - float(at) <= within_s)

    def unacked_keys(self) -> list[str]:
        """Every hash a worker's unacknowledged messages may wait in."""
        return [UNACKED, *(node_keys(node)["unacked_key"] for node in self.nodes())]

    def held_job_ids(self, queues: Iterable[str]) -> set[str]:
        """Job ids named by a message waiting in one of ``queues`` or held unacknowledged by a worker, read
        ``unacked``, queues, ``unacked`` again: a message taken from a queue meanwhile is seen in the second
        read, and a job whose stage pushed its next stage's message and was acknowledged meanwhile in the
        first (a worker holds its message until the next one is queued)."""
        held = self._unacked()
        held.update(*(job_ids_of(raw) for raw in self._queued(queues)))
        return held | self._unacked()

    def _unacked(self) -> set[str]:
        held = set()
        for key in self.unacked_keys():
            for _, value in self._redis.hscan_iter(key, count=PAGE):
                try:
                    raw = json.loads(value)[0]
                except (ValueError, IndexError, TypeError):
                    continue
                held.update(job_ids_of(raw))
        return held

    def _queued(self, queues: Iterable[str]) -> Iterator[str]:
        for queue in queues:
            for suffix in PRIORITY_LISTS:
                start = 0
                while page := decoded(self._redis.lrange(queue + suffix, start, start + PAGE - 1)):
                    yield from page
                    start += PAGE


def node_keys(node: str) -> dict[str, str]:
    """kombu's Redis transport options that give worker ``node`` (``pipeline@host``) keys of its own for the
    messages it holds unacknowledged, instead of the ``unacked`` hash every worker shares by default."""
    return {"unacked_key": f"unacked:{node}", "unacked_index_key": f"unacked_index:{node}",
            "unacked_mutex_key": f"unacked_mutex:{node}"}


def job_ids_of(message: str | bytes | dict[str, Any]) -> list[str]:
    """The jobs a task message names: its ``job_ids`` keyword argument (a batch's stage), or its ``job_id``."""
    try:
        parsed = message if isinstance(message, dict) else json.loads(message)
        body = parsed["body"]
        if parsed.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _, kwargs, _ = json.loads(body)
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    return [job_id for job_id, _ in jobs_of(kwargs, None) or []] if isinstance(kwargs, dict) else []


def jobs_of(kwargs: dict[str, Any], request_id: str | None) -> list[tuple[str, str | None]] | None:
    """The jobs a stage's task message names (``tasks.envelope`` writes them), each with the HTTP request
    that caused it: one (``job_id``: a retry's, a dead letter's sent again, the redrive's; ``request_id`` is
    its message's) or a batch (``job_ids`` and ``request_ids``); None if it names none."""
    if "job_ids" not in kwargs:
        job_id = kwargs.get("job_id")
        return [(job_id, request_id)] if isinstance(job_id, str) else None
    job_ids, request_ids = kwargs["job_ids"], kwargs.get("request_ids")
    if not (isinstance(job_ids, list) and job_ids and all(isinstance(j, str) for j in job_ids)):
        return None
    rids = [r if isinstance(r, str) else None for r in request_ids] if isinstance(request_ids, list) else []
    return list(zip(job_ids, rids + [None] * (len(job_ids) - len(rids)), strict=False))
