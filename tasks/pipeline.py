"""The write path: memory.extract → memory.embed (batched) ∥ memory.upsert_graph → memory.audit; and its
undoing: memory.retract, queued by a rollback in the same Redis step (``memory/state/lua/sessions.lua``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from celery import shared_task
from celery.signals import worker_process_init
from celery_batches import Batches, SimpleRequest  # type: ignore[import-untyped]  # ships no type hints

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


class EmbedBatches(Batches):  # type: ignore[misc]  # Batches is untyped (see its import)
    """Buffers embed requests across messages and runs them as one model call."""

    @property
    def flush_every(self) -> int:
        return get_mneme().settings.embed_batch_size

    @property
    def flush_interval(self) -> float:
        return get_mneme().settings.embed_flush_interval_s


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
            _retry(request, item, exc)
        return 0
    except Exception:  # noqa: BLE001 - isolate the request that broke the batch
        for request, item in items:
            try:
                send_audit(pipeline.embed_stage(mneme, [item]))
            except TransientError as exc:
                _retry(request, item, exc)
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
    mneme.state.dead_letters.push(task_id=request.id, task="memory.embed", queue="embed",
                                  kwargs={"job_id": job_id} if job_id else {}, error=exc, retries=retries,
                                  job_id=job_id, owner=mneme.state.jobs.owner(job_id) if job_id else None)


def _retry(request: SimpleRequest, item: pipeline.EmbedItem, exc: Exception) -> None:
    attempt = int(request.kwargs.get("attempt", 0)) + 1
    if attempt > get_mneme().settings.task_max_retries:
        _dead_letter(request, exc, item.job_id, retries=attempt - 1)
        get_mneme().state.jobs.fail(item.job_id, "embed", f"gave up after {attempt - 1} retries: {described(exc)}")
        return
    embed.apply_async(kwargs={"job_id": item.job_id, "attempt": attempt}, countdown=min(60, 2**attempt))


@shared_task(name="memory.upsert_graph", base=MnemeTask, stage="graph")
def upsert_graph(job_id: str) -> int:
    mneme = get_mneme()
    found = mneme.state.jobs.input(job_id)
    if found is None:  # done, ended on purpose, erased or expired: nothing left to write
        return 0
    records = pipeline.graph_stage(mneme, job_id, *pipeline.graph_input(found))
    send_audit(records)
    pipeline.graph_done(get_mneme(), job_id)
    return len(records)


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
