"""Celery signal receivers: task metrics, task and request ids in log lines, JSON logs for Celery itself.

Imported by every worker and beat through the Celery app's ``include`` list, which Celery imports before it
sets up logging, and by the API through ``workers.api.observability`` (for ``before_task_publish``).

Logging uses the ``setup_logging`` signal, not ``after_setup_logger``: with a receiver connected Celery
installs no handler of its own and does not redirect stdout, so every log line of the worker, its pool
processes (they inherit the handler) and beat goes through :func:`memory.logs.configure_logging` as JSON.
Only the worker's start-up banner, printed straight to stdout, stays plain text.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from celery import Task, signals

from memory import logs, telemetry
from memory.mneme import get_mneme

log = logging.getLogger(__name__)

#: message header carrying the id of the HTTP request that caused a task (copied into follow-up tasks)
REQUEST_ID_HEADER = "mneme_request_id"

_started: dict[str, float] = {}  # task id → perf_counter at prerun, in the process running the task
_node: list[str] = []  # the worker's node name ("pipeline@host"), set before logging is configured


def stage_of(task: Task[Any, Any]) -> str:
    """The pipeline stage a task belongs to (MnemeTask.stage), else its verb (``memory.embed`` → embed)."""
    return getattr(task, "stage", None) or task.name.rsplit(".", 1)[-1]


@signals.task_prerun.connect
def _task_started(task_id: str | None = None, task: Task[Any, Any] | None = None, **_: object) -> None:
    if task_id is None or task is None:
        return
    _started[task_id] = time.perf_counter()
    logs.bind_task(task_id, task.name, task.request.get(REQUEST_ID_HEADER))


@signals.task_postrun.connect
def _task_finished(task_id: str | None = None, task: Task[Any, Any] | None = None, state: str | None = None,
                   **_: object) -> None:
    started = _started.pop(task_id or "", None)
    if started is not None and task is not None:
        telemetry.TASK_SECONDS.labels(task.name, state or "UNKNOWN").observe(time.perf_counter() - started)
        if state == "SUCCESS":  # stages are named as their queues (memory.retract, on extract's, notes its own)
            try:
                get_mneme().state.stages.note_progress(stage_of(task))
            except Exception:  # noqa: BLE001 - progress is for /healthz; it never fails a task
                log.debug("could not note progress of %s", stage_of(task))
    logs.clear_task()


@signals.task_failure.connect
def _task_failed(sender: Task[Any, Any] | None = None, **_: object) -> None:
    if sender is not None:
        telemetry.TASK_FAILURES.labels(sender.name, stage_of(sender)).inc()


@signals.before_task_publish.connect
def _pass_request_id(headers: dict[str, Any] | None = None, **_: object) -> None:
    rid = logs.request_id.get()
    if rid and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, rid)


@signals.celeryd_init.connect
def _remember_node(sender: str | None = None, **_: object) -> None:
    if sender:
        _node[:] = [sender]


@signals.setup_logging.connect
def _json_logs(loglevel: int | None = None, **_: object) -> None:
    if _node:
        service = "worker-" + _node[0].split("@", 1)[0]  # the stack's process name: worker-pipeline, …
    else:
        service = "beat" if "beat" in sys.argv else "celery"
    logs.configure_logging(service, loglevel or logging.INFO)
