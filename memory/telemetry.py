"""Prometheus metrics of every Mneme process, and the body of ``GET /metrics``.

The metric objects below are registry entries, not clients: defining them at import opens nothing
(in multi-process mode the first observation opens this process's file).

Multi-process design. The API, the Celery workers (and their prefork children) and beat are separate
processes, and a task's metrics are observed in the worker's child process while ``/metrics`` is served by
the API. prometheus_client's multiprocess mode joins them: when ``PROMETHEUS_MULTIPROC_DIR`` is set (the
stack sets it to ``<data dir>/metrics`` for every process and empties it at start), every process writes its
counters and histograms to its own memory-mapped ``<type>_<pid>.db`` file there, and ``render_metrics``
sums all files with a ``MultiProcessCollector``. Only counters and histograms are kept in files, so a
dead process needs no ``mark_process_dead``: its totals simply stay in the sums. Gauges are never kept in
files: queue depths are read live from Redis at scrape time by :class:`QueueDepthCollector`. Without the
variable (tests, one process) the metrics live in :data:`REGISTRY` and are served from there.

| metric                              | type      | labels                 |
|-------------------------------------|-----------|------------------------|
| mneme_http_request_seconds          | histogram | method, route, status  |
| mneme_working_memory_ops_total      | counter   | op                     |
| mneme_working_memory_op_seconds     | histogram | op                     |
| mneme_recall_seconds                | histogram |                        |
| mneme_task_seconds                  | histogram | task, state            |
| mneme_task_failures_total           | counter   | task, stage            |
| mneme_llm_tokens_total              | counter   | tenant                 |
| mneme_embedded_texts_total          | counter   | source                 |
| mneme_queue_depth                   | gauge     | queue (live, Redis)    |
| mneme_dead_letters                  | gauge     | (live, Redis)          |

Label values are bounded and hold no user content: ``route`` is the route template (``/v1/users/{user_id}``),
never the path, so neither a user id nor the metric files in the data dir can leak one.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

from memory.errors import TransientError
from memory.state.broker import Broker

log = logging.getLogger("mneme.telemetry")

PREFIX = "mneme_"

REGISTRY = CollectorRegistry()

HTTP_SECONDS = Histogram(
    "mneme_http_request_seconds", "HTTP request latency by method, route template and status.",
    ("method", "route", "status"), registry=REGISTRY)
WORKING_OPS = Counter(
    "mneme_working_memory_ops_total", "Working-memory Lua steps run, by op (append, read, before, rollback, get).",
    ("op",), registry=REGISTRY)
WORKING_OP_SECONDS = Histogram(
    "mneme_working_memory_op_seconds", "Latency of one working-memory Lua step, by op.", ("op",),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0), registry=REGISTRY)
RECALL_SECONDS = Histogram(
    "mneme_recall_seconds", "Latency of one recall (working + episodic + graph).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=REGISTRY)
TASK_SECONDS = Histogram(
    "mneme_task_seconds", "Celery task run time by task name and final state (SUCCESS, RETRY, FAILURE).",
    ("task", "state"), buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=REGISTRY)
TASK_FAILURES = Counter(
    "mneme_task_failures_total", "Celery tasks that failed for good, by task name and pipeline stage.",
    ("task", "stage"), registry=REGISTRY)
LLM_TOKENS = Counter(
    "mneme_llm_tokens_total", "LLM tokens charged to each tenant's daily budget.", ("tenant",),
    registry=REGISTRY)
EMBEDDED_TEXTS = Counter(
    "mneme_embedded_texts_total", "Texts a vector was needed of (messages, the turns they answer, queries), by "
    "where it came from: the model, this process's recent vectors, or working memory (shared: kept there by the "
    "embed worker that embedded the turn).",
    ("source",), registry=REGISTRY)


@contextmanager
def observe_working(op: str) -> Iterator[None]:
    """Count one working-memory step and time it, whether it succeeds or raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        WORKING_OPS.labels(op).inc()
        WORKING_OP_SECONDS.labels(op).observe(time.perf_counter() - started)


class QueueDepthCollector:
    """``mneme_queue_depth{queue}`` and ``mneme_dead_letters``, read from the broker at each scrape.

    A queue's depth is what waits in the broker (all priority lists), not what a worker has reserved.
    When Redis does not answer, both gauges are left out of the scrape (and a warning logged) rather
    than reported as 0, so an alert on depth cannot mistake an outage for an empty queue."""

    def __init__(self, broker: Broker, queue_names: Sequence[str]) -> None:
        self.broker, self.queue_names = broker, tuple(queue_names)

    def collect(self) -> Iterable[Metric]:
        try:
            depths, dead = self.broker.depths(self.queue_names), self.broker.dead_letters()
        except TransientError as exc:
            log.warning("queue depths unavailable: %s", exc)
            return
        gauge = GaugeMetricFamily("mneme_queue_depth", "Messages waiting in each Celery queue.", labels=("queue",))
        for name, depth in zip(self.queue_names, depths, strict=True):
            gauge.add_metric([name], depth)
        yield gauge
        yield GaugeMetricFamily("mneme_dead_letters", "Tasks waiting in the dead-letter list.", value=dead)


class _OnlyMneme:
    """The multiprocess files also hold other libraries' metrics (Flower's): serve Mneme's only."""

    def __init__(self, collector: MultiProcessCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterable[Metric]:
        metrics: Iterable[Metric] = self.collector.collect()  # type: ignore[no-untyped-call]  # unannotated upstream
        return [m for m in metrics if m.name.startswith(PREFIX)]


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def metrics_registry(broker: Broker, queue_names: Sequence[str]) -> CollectorRegistry:
    """A registry for one scrape: every process's metrics (or this process's) plus live queue depths."""
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path:
        collector = MultiProcessCollector(None, path=path)  # type: ignore[no-untyped-call]  # unannotated upstream
        registry.register(_OnlyMneme(collector))
    else:
        registry.register(REGISTRY)
    registry.register(QueueDepthCollector(broker, queue_names))
    return registry


def render_metrics(broker: Broker, queue_names: Sequence[str]) -> tuple[bytes, str]:
    """The ``/metrics`` body in the Prometheus text format 0.0.4, and its content type."""
    return generate_latest(metrics_registry(broker, queue_names)), CONTENT_TYPE_PLAIN_0_0_4
