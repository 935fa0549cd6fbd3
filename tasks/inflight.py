"""Which jobs the broker still holds, so the redrive re-sends only what is lost.

A job is not done for two reasons: its task is lost (the broker dropped it, or a worker took it and died
before kombu recorded it as unacknowledged), or it is simply still on its way — waiting in a queue behind a
backlog, or held by a worker (running, prefetched, buffered by celery-batches, or waiting for a retry's
countdown; kombu keeps each of these in its ``unacked`` hash until the ack, and puts a dead worker's back on
its queue after the visibility timeout). Only the first kind needs re-sending: re-sending the second
multiplied the work of a backlog (2,502 extra extractions for 2,000 messages in 8 runs).

Every pipeline task carries its ``job_id`` as its one argument that matters, so a job is held if a message
in a queue, or in ``unacked``, names it. Read from kombu's Redis transport layout: each queue is a list
(with a suffix per priority step), messages are protocol-2 JSON whose body is ``[args, kwargs, embed]``,
base64-encoded unless it was built by ``tasks.envelope``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator

import redis

UNACKED = "unacked"  # kombu's default ``unacked_key``
PRIORITY_SEP = "\x06\x16"  # kombu's ``sep``: a queue's list for priority p > 0 is queue + sep + p
PRIORITY_STEPS = (3, 6, 9)  # kombu's default steps above 0
PAGE = 1000


def held_job_ids(client: redis.Redis, queues: Iterable[str]) -> set[str]:
    """Job ids named by a message waiting in one of ``queues`` or held unacknowledged by a worker. Queues
    are read before ``unacked``: a message moving from one to the other meanwhile is seen in the second."""
    held = {job_id for raw in _queued(client, queues) if (job_id := job_id_of(raw))}
    for _, value in client.hscan_iter(UNACKED, count=PAGE):
        try:
            raw = json.loads(value)[0]
        except (ValueError, IndexError, TypeError):
            continue
        if job_id := job_id_of(raw):
            held.add(job_id)
    return held


def _queued(client: redis.Redis, queues: Iterable[str]) -> Iterator[str | dict]:
    for queue in queues:
        for name in (queue, *(f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS)):
            start = 0
            while page := client.lrange(name, start, start + PAGE - 1):
                yield from page
                start += PAGE


def job_id_of(message: str | bytes | dict) -> str | None:
    """The ``job_id`` keyword argument of a task message, if it has one."""
    try:
        if not isinstance(message, dict):
            message = json.loads(message)
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _, kwargs, _ = json.loads(body)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    job_id = kwargs.get("job_id") if isinstance(kwargs, dict) else None
    return job_id if isinstance(job_id, str) else None
