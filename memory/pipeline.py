"""The write path's stages as plain functions; Celery tasks only call these.

extract → (embed → episodic upsert) ∥ (graph merge → audit). Every stage is idempotent: ids are
deterministic, upserts replace, graph evidence merges once, and job stages complete once.

A message a rollback took back (撤回, ``retract``) is dropped by every stage that has not run yet (each
asks working memory, where the rollback marked it in the same step); a stage that was already writing
when it was taken back checks again after its write and retracts what it wrote.
"""

from __future__ import annotations

import base64
import html
import logging
import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from pydantic import BaseModel

from memory import anchoring, feedback, ids, tuning
from memory.crypto import SEALED_TEXT, open_text
from memory.embedding import embed_each, in_context
from memory.episodic import AddReport
from memory.errors import InvalidInput, NotFound
from memory.extraction import extract
from memory.mneme import Mneme
from memory.models import REMEMBERED_ROLES, Event, EventType, Extraction, Fact, Message, Relation
from memory.progress import Tick
from memory.provenance import Messages
from memory.state.jobs import Declaration, JobInput, JobWork
from memory.state.policy import CHILD_AGE, Policy
from memory.state.working import StoredMessage

EMBED_MAX_CHARS = 1000
CONTEXT_MAX_CHARS = 300  # of a turn never embedded for itself (a system or tool message), as context
log = logging.getLogger("mneme.pipeline")
RETRACTED_NOTE = "its message was taken back (撤回) by a rollback: nothing of it is kept in long-term memory"
ERASED_NOTE = "the user was erased after this message arrived"
CONTEXT_NOTE = "a system or tool message: context for the session, kept in working memory only, never taken as memory"
ENDED_NOTES = {"dropped": ERASED_NOTE, "retracted": RETRACTED_NOTE}  # how a job ends before extraction, and why


class EmbedItem(BaseModel):
    """One message's embed input, built from its job (``embed_items``)."""

    job_id: str
    text: str  # empty in child mode: nothing of the content is embedded
    events: list[Event]
    tenant: str
    user_id: str
    received_at: float
    session_id: str
    message_id: str


class Mode(StrEnum):
    drop = "drop"  # the user was erased after this message arrived, or a rollback took it back
    working_only = "working_only"  # no consent to long-term memory
    child = "child"  # under 13: events without content, no graph writes
    full = "full"


ExtractInput = tuple[Message, str | None]  # a job's message, and how its job must end before extraction if it must


def extract_inputs(mneme: Mneme, found: Sequence[JobInput | None]) -> list[ExtractInput | InvalidInput | None]:
    """Each job's message and how its job must end before extraction, if it must: "dropped" (its user was
    erased after it arrived) or "retracted" (a rollback took it back), asked for every job in one round trip
    each. None for a job with nothing left to do, the ``InvalidInput`` of a job whose message is malformed (it
    fails alone)."""
    decoded: list[Message | InvalidInput | None] = []
    for job in found:
        try:
            decoded.append(job.message() if job else None)
        except InvalidInput as exc:
            decoded.append(exc)
    messages = [d for d in decoded if isinstance(d, Message)]
    erased = mneme.state.policies.erased_after_each([(m.tenant, m.user_id, m.received_at) for m in messages])
    back = _taken_back(mneme, messages)
    ends = iter("dropped" if e else "retracted" if b else None for e, b in zip(erased, back, strict=True))
    return [(d, next(ends)) if isinstance(d, Message) else d for d in decoded]


def gate(mneme: Mneme, job_id: str, message: Message, ended: str | None, policy: Policy) -> tuple[Mode, Message]:
    """What long-term memory may keep of this message (``ended``: how its job must end first, if it must, as
    ``extract_inputs`` found; ``policy``: its user's, read for the batch), and the message with its text
    opened."""
    if ended:
        mneme.state.jobs.finish(job_id, ended, ENDED_NOTES[ended])
        return Mode.drop, message
    if message.role not in REMEMBERED_ROLES:
        mneme.state.jobs.finish(job_id, "done", CONTEXT_NOTE)
        return Mode.working_only, message
    if not policy.keeps_long_term:
        mneme.state.jobs.finish(job_id, "done", "long-term memory is off until the user consents: working memory only")
        return Mode.working_only, message
    return (Mode.child if policy.child else Mode.full), opened(mneme, message)


def opened(mneme: Mneme, message: Message) -> Message:
    """The message with its text unsealed (a child's is sealed at rest); empty once the user's key is gone."""
    if not message.content.startswith(SEALED_TEXT):
        return message
    key = mneme.user_keys.get(message.tenant, message.user_id, create=False)
    text = open_text(key, message.content, f"{message.session_id}\x1f{message.message_id}")
    return message.model_copy(update={"content": text or ""})


def rule_stage(mneme: Mneme, mode: Mode, message: Message) -> tuple[Mode, Extraction]:
    extraction = extract(message, mneme.vocabulary)
    if any(e.event_type is EventType.operation_failure for e in extraction.events):
        mneme.state.counters.note_failed_session(message.tenant, message.session_id)
    if mode is Mode.full and any(f.relation == Relation.age and f.object.isdigit() and int(f.object) < CHILD_AGE
                                 for f in extraction.facts):
        declared = f"declared in {message.message_id}"
        mneme.privacy.set_child(message.tenant, message.user_id, True, declared, source="pipeline")
        mode = Mode.child
    if mode is Mode.child:  # type only: no content, no keywords, no index tokens, no graph writes
        extraction = Extraction(events=type_only(extraction.events), facts=[])
    return mode, extraction


def type_only(events: Sequence[Event]) -> list[Event]:
    return [e.model_copy(update={"summary": "", "keywords": [], "tokens": []}) for e in events]


def needs_llm(mneme: Mneme, extraction: Extraction) -> bool:
    """The LLM stage (when configured) sees what the rules did not settle: a message they could not type, or a
    claim of theirs less sure than ``llm_check_below`` (``memory.llm``)."""
    return bool(mneme.settings.llm_base_url) and (
        all(e.event_type is EventType.statement for e in extraction.events)
        or any(f.confidence < mneme.settings.llm_check_below for f in extraction.facts))


def llm_admitted(mneme: Mneme, job_id: str, message: Message) -> bool:
    """Whether the message's tenant may queue one more LLM call this minute (``MNEME_LLM_TENANT_CALLS_PER_MIN``),
    so one tenant's flood cannot fill the LLM queue ahead of the others. A message refused keeps the rules'
    extraction; its job says ``llm: tenant_rate``, and the reason is counted."""
    if mneme.state.llm_usage.admit_call(message.tenant, mneme.settings.llm_tenant_calls_per_min, time.time()):
        return True
    mneme.state.jobs.note(job_id, llm="tenant_rate")
    mneme.state.llm_usage.count_failure("tenant_rate")
    return False


def llm_stage(mneme: Mneme, job_id: str, message: Message) -> Extraction:
    """Never loses the message: any LLM failure returns the rules' result, counted by reason."""
    extraction, outcome = mneme.llm.extract(message, extract(message, mneme.vocabulary))
    mneme.state.jobs.note(job_id, llm=outcome.reason, llm_tokens=outcome.tokens)
    return extraction


def declaration(mneme: Mneme, job_id: str, message: Message, extraction: Extraction, policy: Policy,
                mode: Mode = Mode.full) -> Declaration:
    """The facts anchored, each event and fact stamped with the grants in force (``policy``: its user's; what
    it is collected under, ``memory.purposes``), and what ``Jobs.extracted_each`` records of the extraction with
    the branches that follow (embed, and graph if any facts), declared before they are sent, so none can finish
    first. Their input is the job's (``Jobs.inputs``): their tasks carry the job ids."""
    collected = {"purposes": policy.consent.collected()}
    events = [e.model_copy(update=collected) for e in extraction.events]
    facts = [f.model_copy(update=collected) for f in anchor_facts(mneme, message, extraction.facts)]
    branches = ["embed"] + (["graph"] if facts else [])
    return Declaration(job_id, branches, [e.event_id for e in events],
                       JobWork(mode=mode.value, events=events, facts=facts))


def embed_items(mneme: Mneme, found: Sequence[JobInput | None]) -> list[EmbedItem | InvalidInput | None]:
    """Each job's embed input: None if there is nothing to embed (done, ended, or not extracted), the
    ``InvalidInput`` of a job whose record is malformed (it fails alone), else its item — in child mode (set
    since extraction) without content, and without events once its user paused long-term memory or withdrew
    the purposes they were collected under (the users' policies read in one round trip)."""
    decoded: list[tuple[JobInput, JobWork, Message] | InvalidInput | None] = []
    for job in found:
        try:
            work = job.work() if job else None
            decoded.append((job, work, job.message()) if job and work else None)
        except InvalidInput as exc:
            decoded.append(exc)
    ready = [d for d in decoded if isinstance(d, tuple)]
    policies = iter(mneme.state.policies.get_each([(m.tenant, m.user_id) for _, _, m in ready]))
    items: list[EmbedItem | InvalidInput | None] = []
    for d in decoded:
        if not isinstance(d, tuple):
            items.append(d)
            continue
        job, work, message = d
        policy = next(policies)
        full = work.mode == Mode.full and not policy.child
        events = [e for e in work.events if policy.keeps_long_term and policy.consent.serves(e.purposes)]
        items.append(EmbedItem(job_id=job.job_id, text=opened(mneme, message).content if full else "",
                               events=events if full else type_only(events), tenant=message.tenant,
                               user_id=message.user_id, received_at=message.received_at,
                               session_id=message.session_id, message_id=message.message_id))
    return items


def graph_input(found: JobInput) -> tuple[list[Fact], float]:
    """A job's anchored facts and when its message arrived."""
    work = found.work()
    return (work.facts if work else []), found.message().received_at


def anchor_facts(mneme: Mneme, message: Message, facts: list[Fact]) -> list[Fact]:
    """"那个定律" / "that red button" → the entity the session mentioned last (see memory.anchoring); a fact
    whose object points at nothing the session mentioned is not made ("我讨厌那个公式" with no formula in sight:
    the user dislikes one formula, not formulas)."""
    if not facts or not any(anchoring.is_anaphoric(f.object) for f in facts):
        return facts
    try:
        window = mneme.working.read(message.tenant, message.session_id).messages
    except NotFound:
        window = []
    recent = [(m.message_id, m.content) for m in reversed(window)
              if m.message_id != message.message_id and m.client_ts <= message.client_ts]
    out = []
    for fact in facts:
        if not anchoring.is_anaphoric(fact.object):
            out.append(fact)
        elif (anchored := anchoring.anchor(fact.object, recent)).anchored_to is not None:
            out.append(fact.model_copy(update={"object": anchored.name}))
    return out


class Context(NamedTuple):
    """What a message's vector adds a share of: the turn before it ('' if none), and where working memory may
    hold that turn's own vector (``WorkingMemory.kept_vectors``: tenant, session id, seq), for a user's or
    assistant's turn."""

    text: str
    turn: tuple[str, str, int] | None


def contexts(mneme: Mneme, items: Sequence[EmbedItem]) -> list[Context]:
    """For each message, what its vector adds a share of: the session's turn just before it, what a reply
    answers ('' if none, or in child mode). A user's or assistant's turn is taken whole, as it is embedded
    for itself, so its vector is the one that turn got (``vectors_answered``) and costs no second embedding;
    a system or tool message, never embedded for itself, gives its first ``CONTEXT_MAX_CHARS`` characters.
    Read from working memory (the sessions' windows in one round trip; the whole texts of cut replies not in
    the batch in one more), so no task carries another message's text."""
    wanted = [(item.tenant, item.events[0].session_id, item.events[0].message_ids[0])
              for item in items if item.text and item.events]
    before = iter(mneme.working.turns_before(wanted))
    turns = [(item.tenant, next(before)) if item.text and item.events else (item.tenant, None) for item in items]
    whole: dict[tuple[str, str, str], str | None] = {(i.tenant, i.session_id, i.message_id): i.text for i in items}
    cut = {(tenant, turn.session_id, turn.message_id) for tenant, turn in turns
           if turn and turn.truncated and turn.role in REMEMBERED_ROLES} - whole.keys()
    whole |= dict(zip(cut, mneme.working.full_texts(list(cut)), strict=True))

    def context(tenant: str, turn: StoredMessage | None) -> Context:
        if turn is None:
            return Context("", None)
        if turn.role not in REMEMBERED_ROLES:
            return Context(html.unescape(turn.content)[:CONTEXT_MAX_CHARS], None)
        text = whole.get((tenant, turn.session_id, turn.message_id)) if turn.truncated else None
        return Context(html.unescape(text or turn.content)[:EMBED_MAX_CHARS], (tenant, turn.session_id, turn.seq))

    return [context(tenant, turn) for tenant, turn in turns]


def vectors_answered(mneme: Mneme, said_before: Sequence[Context], texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The own vectors of the turns these messages answer that neither the batch (``texts``) nor this worker's
    recent vectors hold, where the embed worker that embedded them kept them in working memory (another one,
    or this one before its recent vectors let them go); one round trip, and none while every turn is at hand."""
    held = mneme.embedder.held(c.text for c in said_before if c.turn)
    wanted = {c.text: c.turn for c in said_before if c.turn and c.text not in texts and c.text not in held}
    kept = mneme.working.kept_vectors(list(wanted.values()))
    return {text: vector for text, found in zip(wanted, kept, strict=True)
            if (vector := _vector(mneme, found)) is not None}


def _vector(mneme: Mneme, kept: str) -> np.ndarray | None:
    """A vector ``_kept`` wrote, if this worker's embedder made it (the same model: its name and size)."""
    name, _, data = kept.partition("\x1f")
    if name != mneme.embedder.name:
        return None
    raw = base64.b64decode(data)
    return np.frombuffer(raw, dtype=np.float16) if len(raw) == 2 * mneme.embedder.dim else None


def _kept(mneme: Mneme, vector: np.ndarray) -> str:
    """A text's own vector as working memory keeps it: the embedder's name, then its float16s (the precision
    a context's share is taken at, ``in_context``) in base64."""
    return f"{mneme.embedder.name}\x1f{base64.b64encode(vector.astype(np.float16).tobytes()).decode()}"


def embed_stage(mneme: Mneme, items: Sequence[EmbedItem]) -> list[dict[str, Any]]:
    """Embed many messages in one model call and store (or merge) their events; returns the audit
    records of events that left the live layer over the per-user cap. In three steps, so that a worker
    can read and write for one batch while the model embeds another: ``embed_inputs`` (Redis only), then
    ``embed_vectors`` (the model), then ``store_embedded`` (the stores)."""
    return store_embedded(mneme, embed_vectors(mneme, embed_inputs(mneme, items)))


class EmbedInputs(NamedTuple):
    """The messages of a batch still to be kept, the texts the model embeds for them (``embed_inputs``)."""

    items: list[EmbedItem]
    texts: list[str]  # a message's text as it is embedded
    said_before: list[Context]  # a message's context (``contexts``)
    known: dict[str, np.ndarray]  # contexts' own vectors another embedding kept (``vectors_answered``)


class Embedded(NamedTuple):
    """A batch's messages with their vectors, not yet stored (``embed_vectors``)."""

    items: list[EmbedItem]
    vectors: np.ndarray  # a row a message
    kept: list[tuple[str, str, str, str]]  # each session's newest turn's own vector, for working memory


def embed_inputs(mneme: Mneme, items: Sequence[EmbedItem]) -> EmbedInputs:
    """What ``embed_vectors`` needs, read from Redis: the messages still to be kept (one queued before its
    user's erasure, or taken back, ends its job here), their texts, their contexts."""
    items = [i for i, erased in zip(items, _erased(mneme, items), strict=True) if not erased]  # never resurrected
    retracted = [i for i, back in zip(items, _taken_back(mneme, items), strict=True) if back]
    for item in retracted:
        mneme.state.jobs.finish(item.job_id, "retracted", RETRACTED_NOTE)
    items = [i for i in items if i not in retracted]
    texts = [html.unescape(item.text)[:EMBED_MAX_CHARS] for item in items]
    said_before = contexts(mneme, items)
    known = vectors_answered(mneme, said_before, texts) if mneme.settings.context_vector_weight else {}
    return EmbedInputs(items, texts, said_before, known)


def embed_vectors(mneme: Mneme, inputs: EmbedInputs) -> Embedded:
    """The messages' vectors, each its text's own plus a share of its context's, in one model call."""
    items, texts, said_before = inputs.items, inputs.texts, inputs.said_before
    weight = mneme.settings.context_vector_weight
    own = embed_each(mneme.embedder, [*texts, *(c.text for c in said_before if weight)], inputs.known)
    vectors = in_context(own, texts, [c.text for c in said_before], weight, mneme.embedder.dim)
    # each session's newest turn here: what its next turn answers, maybe on another embed worker
    newest = {(i.tenant, i.session_id): (i, text) for i, text in zip(items, texts, strict=True) if text and weight}
    kept = [(item.tenant, item.session_id, item.message_id, _kept(mneme, own[text])) for item, text in newest.values()]
    return Embedded(items, vectors, kept)


def store_embedded(mneme: Mneme, embedded: Embedded) -> list[dict[str, Any]]:
    """The messages' events stored (or merged), their jobs done; what was written of a message taken back
    meanwhile is removed again."""
    mneme.working.keep_vectors(embedded.kept)
    policies = mneme.state.policies
    with policies.writing({(item.tenant, item.user_id) for item in embedded.items}):
        # the tombstone before writing and after: a user erased meanwhile keeps nothing of it
        kept = [i for i, item in enumerate(embedded.items) if not _erased(mneme, [item])[0]]
        items = [embedded.items[i] for i in kept]
        vectors = embedded.vectors[kept] if kept else embedded.vectors[:0]
        events = [event for item in items for event in item.events]
        rows = np.stack([vectors[i] for i, item in enumerate(items) for _ in item.events]) if events else vectors
        said = {event.event_id: item.text for item in items for event in item.events}  # event ids are per user
        report = mneme.episodic.add(events, rows, said) if events else AddReport()
        erased = {(item.tenant, item.user_id) for item, gone in zip(items, _erased(mneme, items), strict=True) if gone}
        for tenant, user_id in erased:
            mneme.episodic.erase(tenant, user_id)
    items = [item for item in items if (item.tenant, item.user_id) not in erased]
    records = []
    done: dict[str, dict[str, int | str]] = {}
    for item, back in zip(items, _taken_back(mneme, items), strict=True):
        if back:  # taken back while this batch was being written: what it wrote goes too
            records += retract(mneme, item.tenant, item.user_id, item.session_id, [item.message_id])[1]
            continue
        done[item.job_id] = {"embed_batch": len(items),
                             "merged": sum(1 for e in item.events if e.event_id in report.merged)}
    mneme.state.jobs.complete_each("embed", done)
    if report.evicted or report.consolidated:
        log.info("over the per-user cap: %d events to the deep tier, %d consolidated", len(report.evicted),
                 len(report.consolidated))
    return mneme.trail.layer_changes(report) + records


def _erased(mneme: Mneme, items: Sequence[EmbedItem]) -> list[bool]:
    """Whether each item's user was erased after it arrived; its job ends as dropped."""
    gone = mneme.state.policies.erased_after_each([(i.tenant, i.user_id, i.received_at) for i in items])
    for item, erased in zip(items, gone, strict=True):
        if erased:
            mneme.state.jobs.finish(item.job_id, "dropped", ERASED_NOTE)
    return gone


def _taken_back(mneme: Mneme, said: Sequence[EmbedItem | Message]) -> list[bool]:
    """Which of these messages a rollback took back, in one round trip per tenant."""
    back: dict[int, bool] = {}
    for tenant in {s.tenant for s in said}:
        mine = [i for i, s in enumerate(said) if s.tenant == tenant]
        back.update(zip(mine, mneme.working.retracted_each(
            tenant, [(said[i].session_id, said[i].message_id) for i in mine]), strict=True))
    return [back[i] for i in range(len(said))]


def graph_stage(mneme: Mneme, job_id: str, facts: Sequence[Fact], received_at: float = 0.0) -> list[dict[str, Any]]:
    """Merge the facts; returns the audit records of what changed."""
    if not facts:
        return []
    tenant, user_id = facts[0].tenant, facts[0].user_id
    session_id, message_id = facts[0].session_id or "", (facts[0].message_ids or [""])[0]

    def taken_back() -> bool:
        return bool(session_id and message_id) and mneme.working.retracted(tenant, session_id, message_id)

    policies = mneme.state.policies

    def erased() -> bool:
        if policies.erased_after(tenant, user_id, received_at):
            mneme.state.jobs.finish(job_id, "dropped", ERASED_NOTE)
            return True
        return False

    with policies.writing([(tenant, user_id)]):  # the tombstone before writing and after (``store_embedded``)
        if erased():
            return []
        policy = policies.get(tenant, user_id)
        if policy.child or not policy.keeps_long_term or not policy.consent.serves(facts[0].purposes):
            mneme.state.jobs.complete(job_id, "graph")  # consent paused or withdrawn, or child mode, meanwhile
            return []
        if taken_back():
            mneme.state.jobs.finish(job_id, "retracted", RETRACTED_NOTE)
            return []
        changes = mneme.semantic.apply(facts)
        if erased():
            mneme.semantic.erase(tenant, user_id)
            return []
    records = mneme.trail.graph_changes(changes, operator_id="pipeline")
    if taken_back():  # taken back while merging: what was merged goes too
        records += retract(mneme, tenant, user_id, session_id, [message_id])[1]
    return records


def retract(mneme: Mneme, tenant: str, user_id: str, session_id: str,
            message_ids: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Remove what long-term memory made of messages a rollback (or a session's deletion) took back
    (``Privacy.forget_messages``); then their jobs end as ``retracted``, so a client polling one knows
    nothing of it is left, and nothing re-sends it. Returns a report and the audit records of the graph
    changes. Running it again changes nothing."""
    removed, changes = mneme.privacy.forget_messages(tenant, user_id, Messages.of_session(session_id, message_ids),
                                                     why="taken back (撤回)")
    for message_id in message_ids:
        mneme.state.jobs.finish(ids.job_id(tenant, session_id, message_id), "retracted", RETRACTED_NOTE)
    report = {"messages": len(message_ids), "events_removed": removed, "beliefs_changed": len(changes)}
    return report, mneme.trail.graph_changes(changes, operator_id="retraction")


def graph_done(mneme: Mneme, job_ids: Sequence[str]) -> None:
    """Called once the graph branch's audit records are queued: until then a job is not done, so a redrive
    re-sends it (the same record ids) if anything after the graph write was lost."""
    mneme.state.jobs.complete_each("graph", {job_id: {} for job_id in job_ids})


def stale_jobs(mneme: Mneme, limit: int, older_than_s: float | None = None) -> list[str]:
    return mneme.state.jobs.stale(mneme.settings.redrive_after_s if older_than_s is None else older_than_s, limit)


def tuning_stage(mneme: Mneme, pairs_path: Path | None, *, publish: bool, dry_run: bool, rank: int,
                 epochs: int) -> dict[str, Any]:
    """Train on a JSON-lines file of pairs, or (no path) on the pairs users' feedback marked useful."""
    if pairs_path is None:
        pairs = [tuning.TrainingPair(query=q, positive=p)
                 for q, p in feedback.training_pairs(mneme, mneme.settings.tenant)]
    else:
        pairs = tuning.read_pairs(pairs_path)
    if dry_run:
        return {"pairs": len(pairs), "dry_run": True}
    report = tuning.train(mneme.embedder, pairs, tuning.adapters_dir(mneme.settings.data_dir), rank=rank, epochs=epochs)
    if publish:
        mneme.state.adapter.publish(report.version)
    return {**report.model_dump(), "published": publish, "dry_run": False}


def decay_stage(mneme: Mneme, *, dry_run: bool, limit: int, batch_size: int,
                tick: Tick | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    report = mneme.semantic.decay(dry_run=dry_run, limit=limit, batch_size=batch_size, tick=tick)
    return report.model_dump(), mneme.trail.graph_changes(report.changes, operator_id="decay")
