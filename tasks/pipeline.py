"""The write path: memory.extract → memory.embed (batched) ∥ memory.upsert_graph → memory.audit; and its
undoing: memory.retract, queued by a rollback in the same Redis step (``memory/state/lua/sessions.lua``)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from celery import shared_task
from celery.signals import worker_process_init
from celery.worker.request import Request
from celery_batches import Batches, SimpleRequest  # type: ignore[import-untyped]  # ships no type hints
from celery_batches.trace import apply_batches_task  # type: ignore[import-untyped]

from memory import pipeline
from memory.errors import InvalidInput, TransientError, described
from memory.logs import request_id
from memory.mneme import get_mneme
from memory.models import Extraction, Message
from tasks.base import MnemeTask
from tasks.envelope import task_message

log = logging.getLogger(__name__)


@shared_task(name="memory.extract", base=MnemeTask, stage="extract")
def extract(job_id: str) -> dict[str, Any]:
    mneme = get_mneme()
    found = mneme.state.jobs.input(job_id)
    if found is None:
        return {"mode": "gone"}
    mode, parsed = pipeline.gate(mneme, job_id, found.message())
    if mode in (pipeline.Mode.drop, pipeline.Mode.working_only):
        return {"mode": mode.value}
    mode, extraction = pipeline.rule_stage(mneme, mode, parsed)
    if mode is pipeline.Mode.full and pipeline.needs_llm(mneme, extraction):
        llm_extract.apply_async(kwargs={"job_id": job_id})
        return {"events": len(extraction.events), "facts": len(extraction.facts), "llm": True}
    return _fan_out(job_id, parsed, extraction, mode)


class LLMTask(MnemeTask):
    """Runs on its own queue, rate-limited per worker (``MNEME_LLM_RATE_LIMIT``)."""

    @property
    def rate_limit(self) -> str:  # type: ignore[override]
        return get_mneme().settings.llm_rate_limit


@shared_task(name="memory.llm_extract", base=LLMTask, stage="llm")
def llm_extract(job_id: str) -> dict[str, Any]:
    mneme = get_mneme()
    found = mneme.state.jobs.input(job_id)
    if found is None:
        return {"mode": "gone"}
    mode, parsed = pipeline.gate(mneme, job_id, found.message())  # asked again: erased or taken back meanwhile?
    if mode is not pipeline.Mode.full:
        return {"mode": mode.value}
    return _fan_out(job_id, parsed, pipeline.llm_stage(mneme, job_id, parsed))


BRANCH_TASKS = {"embed": "memory.embed", "graph": "memory.upsert_graph"}


def _fan_out(job_id: str, message: Message, extraction: Extraction,
             mode: pipeline.Mode = pipeline.Mode.full) -> dict[str, Any]:
    def sends(branches: Sequence[str]) -> list[tuple[str, str]]:  # pushed in the step that declares them
        routes = embed.app.conf.task_routes  # the Celery app's (``workers.celery_app.ROUTES``)
        return [task_message(BRANCH_TASKS[b], str(uuid.uuid4()), {"job_id": job_id},
                             routes[BRANCH_TASKS[b]]["queue"], request_id.get()) for b in branches]

    pipeline.declare(get_mneme(), job_id, message, extraction, sends, mode)
    return {"events": len(extraction.events), "facts": len(extraction.facts), "mode": mode.value}


@worker_process_init.connect
def _preload_embedder(**_: object) -> None:
    """The embed worker loads its model (and encodes once) at start, so the first message is not the slow one."""
    mneme = get_mneme()
    if mneme.settings.preload_embedder:
        mneme.warm_up()


class StageBatches(Batches):  # type: ignore[misc]  # Batches is untyped (see its import)
    """A stage that runs its requests in batches: up to a batch of messages, or what came within the flush
    interval, as one task run in the pool. celery-batches sends no task events, so each request sends its own
    here (received, started, succeeded: a request the stage could not do is a dead letter, see ``embed``), and
    Flower lists a batched stage's messages like any task's. Events go out only while they are on (Flower
    turns them on while it looks). Acknowledged late, once the batch has run, as celery-batches does."""

    def flush(self, requests: Sequence[Request]) -> Any:
        for req in requests:
            req.send_event("task-received", name=req.name, args=req.argsrepr, kwargs=req.kwargsrepr,
                           root_id=req.root_id, parent_id=req.parent_id, retries=req.request_dict.get("retries", 0))
        started = time.monotonic()

        def on_accepted(pid: int, time_accepted: float) -> None:
            for req in requests:
                if not req.task.acks_late:
                    req.acknowledge()
                req.send_event("task-started", pid=pid)

        def on_return(result: Any) -> None:
            runtime = time.monotonic() - started
            for req in requests:
                if req.task.acks_late:
                    req.acknowledge()
                req.send_event("task-succeeded", result=repr(result), runtime=runtime)

        batch = ([SimpleRequest.from_request(r) for r in requests],)  # picklable, for the prefork pool
        return self._pool.apply_async(apply_batches_task, (self, batch, 0, None), accept_callback=on_accepted,
                                      callback=on_return)


class EmbedBatches(StageBatches):
    """Embed requests across messages, as one model call."""

    @property
    def flush_every(self) -> int:
        return get_mneme().settings.embed_batch_size

    @property
    def flush_interval(self) -> float:
        return get_mneme().settings.embed_flush_interval_s


class GraphBatches(StageBatches):
    """Graph requests across messages: one task run and one audit task for a batch."""

    stage = "graph"

    @property
    def flush_every(self) -> int:
        return get_mneme().settings.graph_batch_size

    @property
    def flush_interval(self) -> float:
        return get_mneme().settings.graph_flush_interval_s


@shared_task(name="memory.embed", base=EmbedBatches)
def embed(requests: list[SimpleRequest]) -> int:
    # celery-batches acknowledges a batch whatever happens in it, so failures are handled here:
    # a transient error re-sends each request with backoff; anything else is isolated request by
    # request so one poison message fails its own job only.
    mneme = get_mneme()
    job_ids = [request.kwargs.get("job_id") for request in requests]
    built = pipeline.embed_items(mneme, mneme.state.jobs.inputs([j for j in job_ids if isinstance(j, str)]))
    items = []
    for request, job_id in zip(requests, job_ids, strict=True):
        if not isinstance(job_id, str):
            _dead_letter(request, InvalidInput("an embed request names no job_id"), None)
            continue
        item = built.pop(0)
        if isinstance(item, InvalidInput):  # a malformed job fails alone
            _dead_letter(request, item, job_id)
            mneme.state.jobs.fail(job_id, "embed", item.message)
        elif item is not None:  # None: nothing left to do
            items.append((request, item))
    try:
        send_audit(pipeline.embed_stage(mneme, [item for _, item in items]))
        return len(items)
    except TransientError as exc:
        for request, item in items:
            _retry(embed, request, item.job_id, "embed", exc)
        return 0
    except Exception:  # noqa: BLE001 - isolate the request that broke the batch
        for request, item in items:
            try:
                send_audit(pipeline.embed_stage(mneme, [item]))
            except TransientError as exc:
                _retry(embed, request, item.job_id, "embed", exc)
            except Exception as exc:  # noqa: BLE001
                _dead_letter(request, exc, item.job_id)
                mneme.state.jobs.fail(item.job_id, "embed", f"{type(exc).__name__}: {described(exc)}")
        return 0


def send_audit(records: list[dict[str, Any]]) -> None:
    """Through the audit trail's outbox, with their ``memory.audit`` task pushed in the same transaction (the
    redrive task re-sends them if the broker loses it)."""
    def task(held: list[dict[str, Any]]) -> tuple[str, str]:
        queue = audit.app.conf.task_routes["memory.audit"]["queue"]
        return task_message("memory.audit", str(uuid.uuid4()), {"records": held}, queue, request_id.get())

    get_mneme().trail.submit(records, task=task)


def _dead_letter(request: SimpleRequest, exc: Exception, job_id: str | None, retries: int = 0) -> None:
    mneme = get_mneme()
    mneme.state.dead_letters.push(task_id=request.id, task=request.name,
                                  queue=(request.delivery_info or {}).get("routing_key"),
                                  kwargs={"job_id": job_id} if job_id else {}, error=exc, retries=retries,
                                  job_id=job_id, owner=mneme.state.jobs.owner(job_id) if job_id else None)


def _retry(task: Any, request: SimpleRequest, job_id: str, stage: str, exc: Exception) -> None:
    """A batched request whose stage hit a transient error goes again on its own, with backoff."""
    attempt = int(request.kwargs.get("attempt", 0)) + 1
    if attempt > get_mneme().settings.task_max_retries:
        _dead_letter(request, exc, job_id, retries=attempt - 1)
        get_mneme().state.jobs.fail(job_id, stage, f"gave up after {attempt - 1} retries: {described(exc)}")
        return
    task.apply_async(kwargs={"job_id": job_id, "attempt": attempt}, countdown=min(60, 2**attempt))


@shared_task(name="memory.upsert_graph", base=GraphBatches)
def upsert_graph(requests: list[SimpleRequest]) -> int:
    """The graph branch of a batch of messages, in the order they came (evidence merges depend on it), with
    one audit task for the batch; a job is done once its records are queued. Failures as in ``embed``: a
    request at a time, so a poison message fails its own job only."""
    mneme = get_mneme()
    job_ids = [request.kwargs.get("job_id") for request in requests]
    inputs = iter(mneme.state.jobs.inputs([j for j in job_ids if isinstance(j, str)]))
    records: list[dict[str, Any]] = []
    done: list[str] = []
    for request, job_id in zip(requests, job_ids, strict=True):
        if not isinstance(job_id, str):
            _dead_letter(request, InvalidInput("a graph request names no job_id"), None)
            continue
        found = next(inputs)
        if found is None:  # done, ended on purpose, erased or expired: nothing left to write
            continue
        try:
            records += pipeline.graph_stage(mneme, job_id, *pipeline.graph_input(found))
            done.append(job_id)
        except TransientError as exc:
            _retry(upsert_graph, request, job_id, "graph", exc)
        except Exception as exc:  # noqa: BLE001 - isolate the request that failed
            _dead_letter(request, exc, job_id)
            mneme.state.jobs.fail(job_id, "graph", f"{type(exc).__name__}: {described(exc)}")
    send_audit(records)
    pipeline.graph_done(mneme, done)
    return len(done)


@shared_task(name="memory.audit", base=MnemeTask, stage="audit")
def audit(records: list[dict[str, Any]]) -> int:
    get_mneme().trail.write(records)
    return len(records)


@shared_task(name="memory.retract", base=MnemeTask, stage="retract")
def retract(tenant: str, user_id: str, session_id: str, message_ids: list[str]) -> dict[str, Any]:
    """Remove what long-term memory made of messages a rollback took back; redelivery changes nothing."""
    report, records = pipeline.retract(get_mneme(), tenant, user_id, session_id, message_ids)
    send_audit(records)
    return report
