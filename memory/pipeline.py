"""The write path's stages as plain functions; Celery tasks only call these.

extract → (embed → episodic upsert) ∥ (graph merge → audit). Every stage is idempotent: ids are
deterministic, upserts replace, graph evidence merges once, and job stages complete once.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pydantic import BaseModel

from memory.audit import graph_write_record
from memory.extraction import extract
from memory.models import Event, Extraction, Fact, Message
from memory.runtime import Runtime

EMBED_MAX_CHARS = 1000


class EmbedItem(BaseModel):
    job_id: str
    text: str
    events: list[Event]


def extract_stage(rt: Runtime, job_id: str, message: Message) -> tuple[Extraction, EmbedItem]:
    extraction = extract(message)
    branches = ["embed"] + (["graph"] if extraction.facts else [])
    # declare the branches before sending them, so none can finish before the job knows it exists
    rt.jobs.extracted(job_id, branches, [e.event_id for e in extraction.events])
    return extraction, EmbedItem(job_id=job_id, text=message.content, events=extraction.events)


def embed_stage(rt: Runtime, items: Sequence[EmbedItem]) -> None:
    """Embed many messages in one model call and store their events."""
    texts = [html.unescape(item.text)[:EMBED_MAX_CHARS] for item in items]
    vectors = rt.embedder.embed(texts)
    events = [event for item in items for event in item.events]
    rows = [vectors[i] for i, item in enumerate(items) for _ in item.events]
    if events:
        rt.episodic.upsert(events, rows)
    for job_id in dict.fromkeys(item.job_id for item in items):
        rt.jobs.complete(job_id, "embed", embed_batch=len(items))


def graph_stage(rt: Runtime, job_id: str, facts: Sequence[Fact]) -> list[dict]:
    """Merge the facts; returns the audit records of what changed."""
    changes = rt.graph.apply(facts)
    rt.jobs.complete(job_id, "graph")
    return [graph_write_record(change, operator_id="pipeline") for change in changes]


def stale_jobs(rt: Runtime, limit: int) -> list[tuple[str, Message]]:
    return rt.jobs.stale(rt.settings.redrive_after_s, limit)
