"""A stage that runs its task messages in batches (celery-batches), counted in the jobs (messages) they name."""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

from celery.worker.request import Request
from celery_batches import Batches, SimpleRequest  # type: ignore[import-untyped]  # ships no type hints
from celery_batches.trace import apply_batches_task  # type: ignore[import-untyped]

from memory import logs
from memory.mneme import get_mneme
from memory.state.broker import jobs_of
from tasks.signals import REQUEST_ID_HEADER

log = logging.getLogger(__name__)

# A run of several batches, once one is buffered, waits this long for the rest: a backlog's come within
# milliseconds; steady traffic's would take a flush interval, which its messages should not wait.
RUN_WAIT_S = 0.02


class StageBatches(Batches):  # type: ignore[misc]  # Batches is untyped (see its import)
    """A stage that runs its requests in batches: up to a run of messages, or what came within the flush
    interval, as one task run in the pool. celery-batches sends no task events and logs no line per task, so
    each request sends its own events here (received, started, succeeded: a request the stage could not do
    is a dead letter, see ``tasks.pipeline.embed``) and logs its own line once the run is over (with its task
    id and the id of the HTTP request that caused it), and Flower and the logs list a batched stage's
    messages like any task's. Events go out only while they are on (Flower turns them on while it looks).
    Acknowledged late, once the run is over, as celery-batches does. A run is the requests naming
    ``batches_a_run`` batches of ``MNEME_<STAGE>_BATCH_SIZE`` jobs (messages) — one for extraction and graph
    writes, up to four for embedding, whose run is a pipeline (``tasks.pipeline._embed_batch``) — run as soon
    as they are buffered (a run of several ``RUN_WAIT_S`` after its first batch is), or what came within
    ``MNEME_<STAGE>_FLUSH_INTERVAL_S`` (``stage`` and ``batches_a_run`` are given with the task)."""

    stage = ""
    batches_a_run = 1
    flush_every = 2**62  # celery-batches counts requests; a batch is counted in jobs instead (``Strategy``)

    def __init__(self) -> None:
        super().__init__()
        self._buffer = _JobCountingQueue()
        self._soon: Any = None  # the timer entry of a run's flush once its first batch is in (``RUN_WAIT_S``)

    @property
    def batch_jobs(self) -> int:
        size: int = getattr(get_mneme().settings, f"{self.stage}_batch_size")
        return size

    @property
    def flush_interval(self) -> float:
        interval: float = getattr(get_mneme().settings, f"{self.stage}_flush_interval_s")
        return interval

    def Strategy(self, task: Any, app: Any, consumer: Any) -> Callable[..., None]:  # noqa: N802 - Celery's name
        """celery-batches' handler of a message, then a flush as soon as the buffered requests name a run of
        jobs, or ``RUN_WAIT_S`` after they name a batch: a request of the branch stages names up to a batch
        (``tasks.pipeline._branch_send``), so in a backlog a run starts once its requests are in, instead of
        waiting for the flush interval (the worker would sit idle that long between runs), and steady
        traffic's batch runs without waiting for batches that are not coming."""
        handle = super().Strategy(task, app, consumer)

        def on_message(*args: Any, **kwargs: Any) -> None:
            handle(*args, **kwargs)
            if self._buffer.jobs >= self.batch_jobs * self.batches_a_run:
                self._do_flush()
            elif self._buffer.jobs >= self.batch_jobs and self._soon is None:
                self._soon = consumer.timer.call_after(RUN_WAIT_S, self._do_flush)

        return on_message

    def forget_buffered(self) -> None:
        """Drop the requests buffered for a run, and its timers: delivered on a connection that was lost, they
        can be acknowledged no more (``tasks.lifecycle.Reconnected`` puts their messages back)."""
        timers: list[Any] = [self._soon, getattr(self, "_tref", None)]  # celery-batches' own flush timer
        for timer in timers:
            if timer is not None:
                timer.cancel()
        self._soon = None
        self._tref = None
        while not self._buffer.empty():
            self._buffer.get_nowait()
        while not self._pending.empty():
            self._pending.get_nowait()

    def _do_flush(self) -> None:
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        super()._do_flush()

    def flush(self, requests: Sequence[Request]) -> Any:
        for req in requests:
            req.send_event("task-received", name=req.name, args=req.argsrepr, kwargs=req.kwargsrepr,
                           root_id=req.root_id, parent_id=req.parent_id, retries=req.request_dict.get("retries", 0))
        started = time.monotonic()

        def on_accepted(pid: int, time_accepted: float) -> None:
            for req in requests:
                if not req.task.acks_late:
                    req.acknowledge()
                req.send_event("task-started")  # the dispatcher names this process (as Celery's Request does)

        def on_return(result: Any) -> None:
            runtime = time.monotonic() - started
            for req in requests:
                if req.task.acks_late:
                    req.acknowledge()
                req.send_event("task-succeeded", result=repr(result), runtime=runtime)
                for job_id, rid in jobs_of(req.kwargs, req.request_dict.get(REQUEST_ID_HEADER)) or []:
                    logs.bind_task(req.id, req.name, rid)
                    log.info("Task %s[%s] done: job %s, in a batch of %d in %.3fs", req.name, req.id, job_id,
                             len(requests), runtime)
            logs.clear_task()

        batch = ([SimpleRequest.from_request(r) for r in requests],)
        return self._pool.apply_async(apply_batches_task, (self, batch, 0, None), accept_callback=on_accepted,
                                      callback=on_return)


class _JobCountingQueue(queue.Queue[Request]):
    """celery-batches' buffer, counting the jobs its requests name (a request naming none counts one)."""

    jobs = 0

    @staticmethod
    def _size(request: Request) -> int:
        return len(jobs_of(request.kwargs, None) or [None])

    def _put(self, item: Request) -> None:
        super()._put(item)
        self.jobs += self._size(item)

    def _get(self) -> Request:
        item = super()._get()
        self.jobs -= self._size(item)
        return item
