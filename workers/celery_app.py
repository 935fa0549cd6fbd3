"""The Celery app: explicit queues and routes, JSON only, late acks, prefetch 1.

``celery -A workers.celery_app:app worker`` builds the app on first access (PEP 562), so importing
this module creates nothing. ``ops`` is the same app without the task modules, for the processes that only
send tasks by name or watch them — beat and Flower — so they do not load the library (~40 MB each).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

import beat_schedule
from memory.settings import Settings, get_settings

QUEUES = ("extract", "llm", "embed", "graph", "audit", "maintenance")
ROUTES = {
    "memory.extract": "extract",
    "memory.llm_extract": "llm",
    "memory.embed": "embed",
    "memory.upsert_graph": "graph",
    "memory.retract": "extract",
    "memory.audit": "audit",
    "memory.redrive": "maintenance",
    "memory.train_adapter": "maintenance",
    "memory.decay": "maintenance",
    "memory.archive": "maintenance",
    "memory.downweight_noise": "maintenance",
    "memory.compact": "maintenance",
    "memory.erasure_sweep": "maintenance",
}


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker_url,
        "broker_connection_retry_on_startup": True,
        # a worker's unacked messages wait in keys of its own (tasks.lifecycle); those of a worker that never
        # comes back return after the visibility timeout: kombu sweeps a running worker's own keys often
        "broker_transport_options": {"visibility_timeout": settings.visibility_timeout_s,
                                     "unacked_restore_interval": min(10, settings.visibility_timeout_s // 2),
                                     "unacked_restore_throttle": 1},
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_queues": [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES],
        "task_default_queue": "maintenance",
        "task_routes": {task: {"queue": queue} for task, queue in ROUTES.items()},
        # Task events cost ~1.3 ms of CPU per message (four tasks, each publishing its events through a fresh
        # Redis client): workers send them while Flower asks for them (Flower enables them every few seconds),
        # not always. Metrics and logs come from signals, not events.
        "worker_send_task_events": False,
        "task_send_sent_event": False,
        "beat_schedule": beat_schedule.schedule(settings),
        "timezone": "UTC",
    }


TASK_MODULES = ("tasks.pipeline", "tasks.maintenance", "tasks.signals", "tasks.lifecycle")


def create_celery(settings: Settings, with_tasks: bool = True) -> Celery:
    app = Celery("mneme", include=list(TASK_MODULES) if with_tasks else [])
    app.conf.update(celery_config(settings))
    return app


@lru_cache(maxsize=2)
def get_celery(with_tasks: bool = True) -> Celery:
    return create_celery(get_settings(), with_tasks)


def __getattr__(name: str) -> Celery:
    if name in ("app", "ops"):
        return get_celery(with_tasks=name == "app")
    raise AttributeError(name)
