"""A Celery task message built by hand, for the places that push a task right after a Redis step of their own
(``memory.state.dispatch``): the API's extractions of the messages it accepted, extraction's branches that
follow (embed, graph), a rollback's retraction, the audit records held in the outbox — none spends time in a
Celery publish (two publishes were a third of the pipeline worker's CPU).

A stage's message names its jobs: one (``job_id``) or a batch (``job_ids``, with the id of the HTTP request
that caused each beside them in ``request_ids``: a batch has no one request), read by
``memory.state.broker.jobs_of``.

The message is what ``app.send_task`` puts on a kombu Redis-transport queue (Celery message protocol 2,
JSON), with two differences: the body is plain JSON (no ``body_encoding``, which kombu then reads as is), and
no ``task-sent`` event is sent (Flower sees the task from ``task-received`` on). Like every Mneme task it
carries ids only — the message is the job's (``memory.state.jobs``). ``memory.state.dispatch`` LPUSHes it
onto the broker's Redis (``Settings.broker_url``).
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any

from tasks.signals import REQUEST_ID_HEADER

_ORIGIN = f"gen{os.getpid()}@{socket.gethostname()}"
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def task_message(task: str, task_id: str, kwargs: dict[str, Any], queue: str,
                 request_id: str | None = None) -> tuple[str, str]:
    """(the list to LPUSH onto, the JSON to push) to run ``task(**kwargs)`` with id ``task_id`` from ``queue``."""
    headers: dict[str, object] = {
        "lang": "py", "task": task, "id": task_id, "shadow": None, "eta": None, "expires": None, "group": None,
        "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": "()", "kwargsrepr": repr(kwargs),
        "origin": _ORIGIN, "ignore_result": True, "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {},
    }
    if request_id:
        headers[REQUEST_ID_HEADER] = request_id
    return queue, json.dumps({
        "body": json.dumps([[], kwargs, _EMBED], ensure_ascii=False),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": {"correlation_id": task_id, "delivery_mode": 2, "priority": 0,
                       "delivery_info": {"exchange": "", "routing_key": queue}, "delivery_tag": str(uuid.uuid4())},
    }, ensure_ascii=False)


def batch_message(task: str, jobs: Sequence[tuple[str, str | None]], queue: str) -> tuple[str, str]:
    """A message for ``task`` naming all of ``jobs`` (job id, id of the HTTP request that caused it)."""
    kwargs = {"job_ids": [job_id for job_id, _ in jobs], "request_ids": [rid for _, rid in jobs]}
    return task_message(task, str(uuid.uuid4()), kwargs, queue)


def extract_messages(jobs: Sequence[tuple[str, str | None]], queue: str, batch_size: int) -> list[tuple[str, str]]:
    """``memory.extract`` messages for these jobs, each naming up to ``batch_size`` of them."""
    return [batch_message("memory.extract", jobs[i:i + batch_size], queue) for i in range(0, len(jobs), batch_size)]


AUDIT_BATCH = 100  # audit records per memory.audit task: the redrive's, and an API process's reads


def audit_message(records: list[dict[str, Any]], queue: str, request_id: str | None = None) -> tuple[str, str]:
    """A ``memory.audit`` message writing ``records`` (what ``AuditTrail.submit`` pushes once they are held)."""
    return task_message("memory.audit", str(uuid.uuid4()), {"records": records}, queue, request_id)
