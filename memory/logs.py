"""Structured logs: one JSON object per line, carrying the request or task being served.

Every line has ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``service``, ``request_id``,
``task_id``, ``task_name``; ``exc_info`` (the formatted traceback) when there is one, and the ``extra=``
fields of Mneme's own loggers (``mneme.*``) only: other libraries' extras are dropped, because Celery's
carry a task's args and kwargs, i.e. message content. The ids come from context variables:

- ``request_id``: set per HTTP request by the API's ``RequestIdMiddleware`` (``workers.logs``: from
  ``X-Request-ID``, else a new uuid4; echoed in the response), and in a worker from the task message's header
  (``tasks.signals`` copies it into every task the request sends, so a job's worker lines carry the request
  that made it).
- ``task_id`` / ``task_name``: set by ``task_prerun`` and cleared by ``task_postrun`` (``tasks.signals``).

The API calls :func:`configure_logging` through ``workers.api.observability.install``; Celery workers and beat
through Celery's ``setup_logging`` signal (``tasks.signals``), so Celery's own lines are JSON too. No web
framework here, so tasks import this module without importing ``workers``.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

request_id: ContextVar[str | None] = ContextVar("mneme_request_id", default=None)
task_id: ContextVar[str | None] = ContextVar("mneme_task_id", default=None)
task_name: ContextVar[str | None] = ContextVar("mneme_task_name", default=None)

#: loggers that may bring their own handlers: if they have some, they propagate to the root's JSON handler
#: instead; if they have none they stay as they are (``--no-access-log`` silences ``uvicorn.access`` so)
_OWN_HANDLERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "celery.task", "celery.redirected")
#: attributes every LogRecord has; anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "service": self.service,
            "request_id": request_id.get(),
            "task_id": task_id.get(),
            "task_name": task_name.get(),
        }
        if record.name.startswith("mneme."):
            entry.update((k, v) for k, v in vars(record).items() if k not in _STANDARD and k not in entry)
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _JsonHandler(logging.StreamHandler[TextIO]):
    """Marks the handler :func:`configure_logging` installed, so calling it again replaces it."""


def configure_logging(service: str, level: int | str = logging.INFO) -> None:
    """JSON lines on stderr from the root logger for this process; idempotent. Handlers others put on the
    root (pytest's capture) are kept; uvicorn's and Celery's own handlers are removed so their lines go
    through the root as JSON, once; a logger they silenced (no handler, no propagation) stays silent."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _JsonHandler)]:
        root.removeHandler(handler)
    handler = _JsonHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root.addHandler(handler)
    root.setLevel(level)
    for name in _OWN_HANDLERS:
        logger = logging.getLogger(name)
        if logger.handlers:
            logger.handlers.clear()
            logger.propagate = True


def bind_task(task_id_: str | None, task_name_: str | None, request_id_: str | None = None) -> None:
    task_id.set(task_id_)
    task_name.set(task_name_)
    request_id.set(request_id_)


def clear_task() -> None:
    bind_task(None, None, None)
