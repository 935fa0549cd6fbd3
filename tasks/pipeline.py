"""The write path: memory.extract → memory.embed ∥ memory.upsert_graph → memory.audit, the first three in
batches (``StageBatches``); and its undoing: memory.retract, queued by a rollback, which records the
retraction in its Redis step (``memory/state/lua/sessions.lua``) until this task is done."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple, TypeVar

from celery import shared_task
from celery_batches import SimpleRequest  # type: ignore[import-untyped]  # ships no type hints

from memory import logs, pipeline
from memory.errors import InvalidInput, TransientError, described
from memory.logs import request_id
from memory.mneme import Mneme, get_mneme
from memory.models import Message
from memory.state.broker import jobs_of
from memory.state.jobs import Declaration, JobInput
from memory.state.policy import Policy
from memory.state.working import Retraction
from tasks.base import MnemeTask
from tasks.batches import StageBatches
from tasks.envelope import audit_message, batch_message, extract_messages
from tasks.signals import REQUEST_ID_HEADER

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class LLMTask(MnemeTask):
    """Runs on its own queue, rate-limited per worker (``MNEME_LLM_RATE_LIMIT``)."""

    @property
    def rate_limit(self) -> str:  # type: ignore[override]
        return get_mneme().settings.llm_rate_limit


@shared_task(name="memory.llm_extract", base=LLMTask, stage="llm")
def llm_extract(job_id: str) -> dict[str, Any]:
    mneme = get_mneme()
    [found] = pipeline.extract_inputs(mneme, [mneme.state.jobs.input(job_id)])
    if found is None:
        return {"mode": "gone"}
    if isinstance(found, InvalidInput):
        raise found
    message, ended = found  # asked again: erased or taken back meanwhile?
    policy = mneme.state.policies.get(message.tenant, message.user_id)
    mode, parsed = pipeline.gate(mneme, job_id, message, ended, policy)
    if mode is not pipeline.Mode.full:
        _settle({job_id: message.tenant})  # it ended here
        return {"mode": mode.value}
    extraction = pipeline.llm_stage(mneme, job_id, parsed)
    declared = pipeline.declaration(mneme, job_id, parsed, extraction, policy)._replace(request_id=request_id.get())
    mneme.state.jobs.extracted_each([declared], _branch_send)
    return {"events": len(extraction.events), "facts": len(extraction.facts), "mode": mode.value}


BRANCH_TASKS = {"embed": "memory.embed", "graph": "memory.upsert_graph"}  # branch (its stage) → task


class Job(NamedTuple):
    """A job of a batch: the request that names it, its id, and the id of the HTTP request that caused it."""

    request: SimpleRequest
    job_id: str
    request_id: str | None


def _branch_send(branch: str, declared: list[Declaration]) -> list[tuple[str, str]]:
    """The task messages of a branch for the jobs an extraction declared together (``Jobs.extracted_each``),
    each naming up to a batch of the branch's stage (``MNEME_<STAGE>_BATCH_SIZE``)."""
    task = BRANCH_TASKS[branch]
    queue = embed.app.conf.task_routes[task]["queue"]  # the Celery app's (``workers.celery_app.ROUTES``)
    size: int = getattr(get_mneme().settings, f"{branch}_batch_size")
    return [batch_message(task, [(d.job_id, d.request_id) for d in chunk], queue) for chunk in _chunks(declared, size)]


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for i in range(0, len(items), max(1, size)):
        yield items[i:i + size]


@shared_task(name="memory.extract", base=StageBatches, stage="extract")
def extract(requests: list[SimpleRequest]) -> int:
    """The rules' extraction of a batch of messages, one after another in the order they came (a user who
    declares an age under 13 in one is a child for the next). Their inputs, and whether each was erased or
    taken back, are read in one round trip each; a message the rules could not type goes on to the LLM
    stage; the others are declared in one round trip, with a task a batch for each branch that follows.
    Failures as in ``embed``: job by job, so a poison message fails its own job only."""
    mneme = get_mneme()
    named = _named(requests, "extract")
    if (got := _inputs(extract, named, "extract", lambda found: pipeline.extract_inputs(mneme, found))) is None:
        return 0
    try:
        return _extract_batch(mneme, named, got[0])
    finally:
        _settle(got[1])


def _extract_batch(mneme: Mneme, named: list[Job], inputs: list[pipeline.ExtractInput | InvalidInput | None]) -> int:
    users = list(dict.fromkeys((f[0].tenant, f[0].user_id) for f in inputs if isinstance(f, tuple)))
    try:
        policies = dict(zip(users, mneme.state.policies.get_each(users), strict=True))
    except TransientError as exc:
        _retry_each(extract, named, "extract", exc)
        return 0
    declared: list[tuple[Job, Declaration]] = []
    for job, found in zip(named, inputs, strict=True):
        if found is None:  # done, ended on purpose, erased or expired: nothing left to do
            continue
        with _alone(extract, job, "extract"):
            if isinstance(found, InvalidInput):  # a malformed job fails alone
                raise found
            if (declaration := _extracted(mneme, job, *found, policies)) is not None:
                declared.append((job, declaration))
    try:
        mneme.state.jobs.extracted_each([declaration for _, declaration in declared], _branch_send)
    except TransientError as exc:
        _retry_each(extract, [job for job, _ in declared], "extract", exc)
        return 0
    except Exception:  # noqa: BLE001 - isolate the declaration that broke the step: declaring the others
        for job, declaration in declared:  # again changes nothing but re-sending their (idempotent) branches
            with _alone(extract, job, "extract"):
                mneme.state.jobs.extracted_each([declaration], _branch_send)
        return 0
    return len(declared)


def _extracted(mneme: Mneme, job: Job, message: Message, ended: str | None,
               policies: dict[tuple[str, str], Policy]) -> Declaration | None:
    """One message through the gate and the rules: what to declare of it, or None if its job ended here or
    the LLM stage takes it on. ``policies``: the batch's users', read at its start; a user the rules found
    a child is one for the batch's next messages too."""
    user = (message.tenant, message.user_id)
    mode, parsed = pipeline.gate(mneme, job.job_id, message, ended, policies[user])
    if mode in (pipeline.Mode.drop, pipeline.Mode.working_only):
        return None
    mode, extraction = pipeline.rule_stage(mneme, mode, parsed)
    if mode is pipeline.Mode.child:
        policies[user] = policies[user].model_copy(update={"child": True})
    if (mode is pipeline.Mode.full and pipeline.needs_llm(mneme, extraction)
            and pipeline.llm_admitted(mneme, job.job_id, parsed)):
        llm_extract.apply_async(kwargs={"job_id": job.job_id})
        return None
    return pipeline.declaration(mneme, job.job_id, parsed, extraction, policies[user],
                                mode)._replace(request_id=job.request_id)


@shared_task(name="memory.embed", base=StageBatches, stage="embed", batches_a_run=4)
def embed(requests: list[SimpleRequest]) -> int:
    # celery-batches acknowledges a batch whatever happens in it, so failures are handled here:
    # a transient error re-sends each job with backoff; anything else is isolated job by job
    # so one poison message fails its own job only. Embedded a batch (MNEME_EMBED_BATCH_SIZE) at a time.
    mneme = get_mneme()
    named = _named(requests, "embed")
    if (got := _inputs(embed, named, "embed", lambda found: pipeline.embed_items(mneme, found))) is None:
        return 0
    try:
        return _embed_batch(mneme, named, got[0])
    finally:
        _settle(got[1])


_Batch = Sequence[tuple[Job, pipeline.EmbedItem]]  # a model batch of a run: each message's job and input


def _embed_batch(mneme: Mneme, named: list[Job], built: list[pipeline.EmbedItem | InvalidInput | None]) -> int:
    """The run's messages a model batch (``MNEME_EMBED_BATCH_SIZE``) at a time through the stage's three
    steps (``pipeline.embed_stage``), as a pipeline: while the model embeds a batch on this thread (the only
    one it runs on, as the raw embedder's one thread), a thread beside it stores the batch before and reads
    the inputs of the batch after. A batch that failed is handled once every batch is stored: a transient
    error retries its jobs; any other runs them alone, so one poison message fails its own job only. The run
    is done, and its messages acknowledged, after that."""
    items = []
    for job, item in zip(named, built, strict=True):
        if isinstance(item, InvalidInput):  # a malformed job fails alone
            _dead_letter(job, item)
            mneme.state.jobs.fail(job.job_id, "embed", item.message)
        elif item is not None:  # None: nothing left to do
            items.append((job, item))
    batches = list(_chunks(items, mneme.settings.embed_batch_size))
    failed: list[tuple[_Batch, Exception]] = []

    def outcome(batch: _Batch, step: Callable[[], _T]) -> _T | None:
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - handled once the run's other batches are stored
            failed.append((batch, exc))
            return None

    with ThreadPoolExecutor(1, thread_name_prefix="embed-beside") as beside:
        def aside(step: Callable[..., _T], *args: Any) -> Future[_T]:  # with this thread's log context
            return beside.submit(contextvars.copy_context().run, step, mneme, *args)

        def read(batch: _Batch) -> Future[pipeline.EmbedInputs]:
            return aside(pipeline.embed_inputs, [item for _, item in batch])

        inputs = [read(batches[0])] if batches else []
        stored: list[tuple[_Batch, Future[None]]] = []
        for k, batch in enumerate(batches):
            if k + 1 < len(batches):  # queued before this batch's store: ready when the model is
                inputs.append(read(batches[k + 1]))
            got = outcome(batch, inputs[k].result)
            embedded = None if got is None else outcome(batch, partial(pipeline.embed_vectors, mneme, got))
            if embedded is not None:
                stored.append((batch, aside(_store, embedded)))
    for batch, done in stored:
        outcome(batch, done.result)
    for batch, exc in failed:
        if isinstance(exc, TransientError):
            _retry_each(embed, [job for job, _ in batch], "embed", exc)
            continue
        for job, item in batch:
            with _alone(embed, job, "embed"):
                send_audit(pipeline.embed_stage(mneme, [item]))
    return len(items)


def _store(mneme: Mneme, embedded: pipeline.Embedded) -> None:
    send_audit(pipeline.store_embedded(mneme, embedded))


def send_audit(records: list[dict[str, Any]]) -> None:
    """Through the audit trail's outbox, with their ``memory.audit`` task pushed once they are held (the
    redrive task re-sends them if the task never reaches a worker)."""
    queue = audit.app.conf.task_routes["memory.audit"]["queue"]
    get_mneme().trail.submit(records, task=lambda held: audit_message(held, queue, request_id.get()))


def _dead_letter(job: Job | SimpleRequest, exc: Exception, retries: int = 0) -> None:
    """A job of a batch that failed for good (or a request that names none) as a dead letter of its own, sent
    again as a task for that one job."""
    mneme = get_mneme()
    request, job_id = (job.request, job.job_id) if isinstance(job, Job) else (job, None)
    mneme.state.dead_letters.push(task_id=request.id, task=request.name,
                                  queue=(request.delivery_info or {}).get("routing_key"),
                                  kwargs={"job_id": job_id} if job_id else {}, error=exc, retries=retries,
                                  job_id=job_id, owner=mneme.state.jobs.owner(job_id) if job_id else None)


def _named(requests: Sequence[SimpleRequest], stage: str) -> list[Job]:
    """The jobs a batch's requests name (``jobs_of``); a request that names none is a dead letter."""
    named = []
    for request in requests:
        found = jobs_of(request.kwargs, (request.request_dict or {}).get(REQUEST_ID_HEADER))
        if found is None:
            article = "an" if stage[0] in "aeiou" else "a"
            _dead_letter(request, InvalidInput(f"{article} {stage} request names no job_id"))
            continue
        named += [Job(request, job_id, rid) for job_id, rid in found]
    return named


def _inputs(task: Any, named: Sequence[Job], stage: str,
            decode: Callable[[list[JobInput | None]], list[_T]]) -> tuple[list[_T], dict[str, str]] | None:
    """The batch's jobs' inputs, decoded, in one round trip, and each job's tenant (job id → tenant, for
    ``_settle``); None when Redis failed, each job retried."""
    try:
        found = get_mneme().state.jobs.inputs([job.job_id for job in named])
        return decode(found), {f.job_id: tenant for f in found if f is not None and (tenant := f.tenant)}
    except TransientError as exc:
        _retry_each(task, named, stage, exc)
        return None


def _settle(tenants: dict[str, str]) -> None:
    """The batch's jobs that ended (job id → tenant) free their places in their tenants' lines; the waiting
    jobs let in go to extraction (``memory.state.fairness``). A place this misses (Redis failing here) is
    found by the next step that looks at the tenant's line."""
    mneme = get_mneme()
    if not mneme.state.fair.on or not tenants:
        return
    try:
        ended = set(tenants) - set(mneme.state.jobs.unfinished(list(tenants)))
        send_extractions(mneme.state.fair.ended((tenants[job_id], job_id) for job_id in ended))
    except TransientError:
        log.warning("could not free the places of a batch's ended jobs; the next look at their lines will",
                    exc_info=True)


def send_extractions(jobs: Sequence[tuple[str, str | None]]) -> None:
    """``memory.extract`` tasks, a batch each, for jobs their tenants' lines let in."""
    mneme = get_mneme()
    queue = extract.app.conf.task_routes["memory.extract"]["queue"]
    mneme.state.dispatch.push(extract_messages(jobs, queue, mneme.settings.extract_batch_size))


@contextmanager
def _serving(job: Job) -> Iterator[None]:
    """While one job of a batch runs, log lines and the tasks it sends carry its request's task id and the
    id of the HTTP request that caused it, as they would for a task of its own (``tasks.signals``)."""
    outer = logs.task_id.get(), logs.task_name.get(), logs.request_id.get()
    logs.bind_task(job.request.id, job.request.name, job.request_id)
    try:
        yield
    finally:
        logs.bind_task(*outer)


@contextmanager
def _alone(task: Any, job: Job, stage: str) -> Iterator[None]:
    """One job of a batch (``_serving``) whose failure is its own: a transient error retries it with
    backoff, any other dead-letters it and fails its job."""
    with _serving(job):
        try:
            yield
        except TransientError as exc:
            _retry(task, job, stage, exc)
        except Exception as exc:  # noqa: BLE001 - one job's failure, not the batch's
            _dead_letter(job, exc)
            get_mneme().state.jobs.fail(job.job_id, stage, f"{type(exc).__name__}: {described(exc)}")


def _retry_each(task: Any, jobs: Sequence[Job], stage: str, exc: Exception) -> None:
    """Each job of a batch whose shared step hit a transient error, retried."""
    for job in jobs:
        with _serving(job):
            _retry(task, job, stage, exc)


def _retry(task: Any, job: Job, stage: str, exc: Exception) -> None:
    """A batched job whose stage hit a transient error goes again on its own, with backoff."""
    attempt = int(job.request.kwargs.get("attempt", 0)) + 1
    if attempt > get_mneme().settings.task_max_retries:
        _dead_letter(job, exc, retries=attempt - 1)
        get_mneme().state.jobs.fail(job.job_id, stage, f"gave up after {attempt - 1} retries: {described(exc)}")
        return
    task.apply_async(kwargs={"job_id": job.job_id, "attempt": attempt}, countdown=min(60, 2**attempt))


@shared_task(name="memory.upsert_graph", base=StageBatches, stage="graph")
def upsert_graph(requests: list[SimpleRequest]) -> int:
    """The graph branch of a batch of messages, in the order they came (evidence merges depend on it), with
    one audit task for the batch; a job is done once its records are queued. Failures as in ``embed``: a
    job at a time, so a poison message fails its own job only."""
    mneme = get_mneme()
    named = _named(requests, "graph")
    if (got := _inputs(upsert_graph, named, "graph", list)) is None:
        return 0
    try:
        return _graph_batch(mneme, named, got[0])
    finally:
        _settle(got[1])


def _graph_batch(mneme: Mneme, named: list[Job], inputs: list[JobInput | None]) -> int:
    records: list[dict[str, Any]] = []
    done: list[Job] = []
    for job, found in zip(named, inputs, strict=True):
        if found is None:  # done, ended on purpose, erased or expired: nothing left to write
            continue
        with _alone(upsert_graph, job, "graph"):
            records += pipeline.graph_stage(mneme, job.job_id, *pipeline.graph_input(found))
            done.append(job)
    try:
        send_audit(records)
        pipeline.graph_done(mneme, [job.job_id for job in done])
    except TransientError as exc:  # written, not yet recorded: again (each piece of evidence merges once)
        _retry_each(upsert_graph, done, "graph", exc)
        return 0
    return len(done)


@shared_task(name="memory.audit", base=MnemeTask, stage="audit")
def audit(records: list[dict[str, Any]]) -> int:
    get_mneme().trail.write(records)
    return len(records)


@shared_task(name="memory.retract", base=MnemeTask, stage="retract")
def retract(tenant: str, user_id: str, session_id: str, message_ids: list[str]) -> dict[str, Any]:
    """Remove what long-term memory made of messages a rollback took back; redelivery changes nothing. The
    rollback recorded the retraction; it is done once its audit records are held."""
    mneme = get_mneme()
    report, records = pipeline.retract(mneme, tenant, user_id, session_id, message_ids)
    send_audit(records)
    mneme.working.retraction_done(Retraction(tenant=tenant, user_id=user_id, session_id=session_id,
                                             message_ids=message_ids))
    return report

