"""The write path: memory.extract → memory.embed (batched) ∥ memory.upsert_graph → memory.audit; and its
undoing: memory.retract, queued by a rollback in the same Redis step (``memory/working.lua``)."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_process_init
from celery_batches import Batches

from memory import deadletters, pipeline
from memory.audit import outbox
from memory.errors import TransientError
from memory.models import Extraction, Fact, Message
from memory.runtime import get_runtime
from tasks.base import MnemeTask

log = logging.getLogger(__name__)


@shared_task(name="memory.extract", base=MnemeTask, stage="extract")
def extract(job_id: str, message: dict) -> dict:
    rt = get_runtime()
    mode, parsed = pipeline.gate(rt, job_id, Message.model_validate(message))
    if mode in (pipeline.Mode.drop, pipeline.Mode.working_only):
        return {"mode": mode.value}
    mode, extraction = pipeline.rule_stage(rt, mode, parsed)
    if mode is pipeline.Mode.full and pipeline.needs_llm(rt, extraction):
        llm_extract.apply_async(kwargs={"job_id": job_id, "message": parsed.model_dump(mode="json"),
                                        "fallback": extraction.model_dump(mode="json")})
        return {"events": len(extraction.events), "facts": len(extraction.facts), "llm": True}
    return _fan_out(job_id, parsed, extraction, mode)


class LLMTask(MnemeTask):
    """Runs on its own queue, rate-limited per worker (``MNEME_LLM_RATE_LIMIT``)."""

    @property
    def rate_limit(self) -> str:  # type: ignore[override]
        return get_runtime().settings.llm_rate_limit


@shared_task(name="memory.llm_extract", base=LLMTask, stage="llm")
def llm_extract(job_id: str, message: dict, fallback: dict) -> dict:
    parsed = Message.model_validate(message)
    extraction = pipeline.llm_stage(get_runtime(), job_id, parsed, Extraction.model_validate(fallback))
    return _fan_out(job_id, parsed, extraction)


def _fan_out(job_id: str, message: Message, extraction: Extraction,
             mode: pipeline.Mode = pipeline.Mode.full) -> dict:
    item, facts = pipeline.declare(get_runtime(), job_id, message, extraction, mode)
    embed.apply_async(kwargs={"item": item.model_dump(mode="json")})
    if facts:
        upsert_graph.apply_async(kwargs={"job_id": job_id, "facts": [f.model_dump(mode="json") for f in facts],
                                         "received_at": message.received_at})
    return {"events": len(extraction.events), "facts": len(facts), "mode": mode.value}


@worker_process_init.connect
def _preload_embedder(**_: object) -> None:
    """The embed worker loads its model (and encodes once) at start, so the first message is not the slow one."""
    rt = get_runtime()
    if rt.settings.preload_embedder:
        rt.warm_up()


class EmbedBatches(Batches):
    """Buffers embed requests across messages and runs them as one model call."""

    @property
    def flush_every(self) -> int:  # type: ignore[override]
        return get_runtime().settings.embed_batch_size

    @property
    def flush_interval(self) -> float:  # type: ignore[override]
        return get_runtime().settings.embed_flush_interval_s


@shared_task(name="memory.embed", base=EmbedBatches)
def embed(requests: list) -> int:
    # celery-batches acknowledges a batch whatever happens in it, so failures are handled here:
    # a transient error re-sends each request with backoff; anything else is isolated request by
    # request so one poison message fails its own job only.
    rt = get_runtime()
    items = []
    for request in requests:
        try:
            items.append((request, pipeline.EmbedItem.model_validate(request.kwargs["item"])))
        except (KeyError, ValueError) as exc:
            job_id = request.kwargs.get("item", {}).get("job_id")
            _dead_letter(request, exc, job_id)
            if job_id:
                rt.jobs.fail(job_id, "embed", f"malformed embed request: {exc}")
    try:
        send_audit(pipeline.embed_stage(rt, [item for _, item in items]))
        return len(items)
    except TransientError as exc:
        for request, item in items:
            _retry(request, item, exc)
        return 0
    except Exception:  # noqa: BLE001 - isolate the request that broke the batch
        for request, item in items:
            try:
                send_audit(pipeline.embed_stage(rt, [item]))
            except TransientError as exc:
                _retry(request, item, exc)
            except Exception as exc:  # noqa: BLE001
                _dead_letter(request, exc, item.job_id)
                rt.jobs.fail(item.job_id, "embed", f"{type(exc).__name__}: {exc}")
        return 0


def send_audit(records: list[dict]) -> None:
    """Hold the records in the audit outbox (so the redrive task re-sends them if their message is
    lost), then queue them for the sink."""
    if not records:
        return
    outbox.hold(get_runtime().redis, records)
    try:
        audit.apply_async(kwargs={"records": records})
    except Exception:  # noqa: BLE001 - the records are held; the redrive task sends them
        log.exception("could not queue %d audit records; the redrive task will", len(records))


def _dead_letter(request, exc: Exception, job_id: str | None, retries: int = 0) -> None:
    deadletters.push(get_runtime().redis, task_id=request.id, task="memory.embed", queue="embed",
                     kwargs={"item": request.kwargs.get("item")}, error=exc, retries=retries, job_id=job_id)


def _retry(request, item: pipeline.EmbedItem, exc: Exception) -> None:
    attempt = int(request.kwargs.get("attempt", 0)) + 1
    if attempt > get_runtime().settings.task_max_retries:
        _dead_letter(request, exc, item.job_id, retries=attempt - 1)
        get_runtime().jobs.fail(item.job_id, "embed", f"gave up after {attempt - 1} retries: {exc}")
        return
    embed.apply_async(kwargs={"item": item.model_dump(mode="json"), "attempt": attempt},
                      countdown=min(60, 2**attempt))


@shared_task(name="memory.upsert_graph", base=MnemeTask, stage="graph")
def upsert_graph(job_id: str, facts: list[dict], received_at: float = 0.0) -> int:
    records = pipeline.graph_stage(get_runtime(), job_id, [Fact.model_validate(f) for f in facts], received_at)
    send_audit(records)
    pipeline.graph_done(get_runtime(), job_id)
    return len(records)


@shared_task(name="memory.audit", base=MnemeTask, stage="audit")
def audit(records: list[dict]) -> int:
    rt = get_runtime()
    rt.audit.write(records)
    outbox.release(rt.redis, [r["id"] for r in records])
    return len(records)


@shared_task(name="memory.retract", base=MnemeTask, stage="retract")
def retract(tenant: str, user_id: str, session_id: str, message_ids: list[str]) -> dict:
    """Remove what long-term memory made of messages a rollback took back; redelivery changes nothing."""
    report, records = pipeline.retract(get_runtime(), tenant, user_id, session_id, message_ids)
    send_audit(records)
    return report
