"""Job records as the pipeline keeps them, for tests that send tasks straight to the broker: the message a job
was accepted for (read back from working memory, since a finished job keeps no copy of its text), a job record
written by hand (so a failing task has a job to mark failed), and a finished job put back as a kill -9 before
its acks would have left it (so a redelivered task has real input)."""

from __future__ import annotations

import json

from memory import ids
from memory.extraction import extract
from memory.mneme import Mneme
from memory.models import Message
from memory.state import keys
from memory.state.jobs import JobWork


def accepted_message(rt: Mneme, job_id: str) -> Message:
    job = rt.state.jobs.get(job_id)
    record, full_text = rt.state.working.get(job.tenant, job.session_id, job.message_id)
    return Message(tenant=job.tenant, user_id=job.user_id, session_id=job.session_id, device_id=record.device_id,
                   message_id=job.message_id, role=record.role, content=full_text, client_ts=record.client_ts,
                   received_at=record.received_at)


def write_job(rt: Mneme, job_id: str, user_id: str = "u", session_id: str = "s", tenant: str = "default",
              payload: str | None = None, work: str | None = None) -> None:
    """A job record as the API writes it (``payload``: its message as stored; ``work``: what extraction
    left for embed and graph, as stored)."""
    message = Message(tenant=tenant, user_id=user_id, session_id=session_id, message_id=job_id, role="user",
                      content="x", client_ts=1.0)
    rt.state.jobs.accept(job_id, (tenant, user_id, session_id, job_id), payload or message.model_dump_json(),
                         rt.settings.job_ttl_s)
    if work is not None:
        rt.state.client.hset(keys.job(job_id), "work", work)  # as extraction leaves it, malformed if the test says so


def reopen_job(rt: Mneme, job_id: str) -> Message:
    """A done job put back to "extracted, embed and graph not yet acknowledged", its input restored: what the
    redelivery of its tasks after a kill -9 sees."""
    job, message = rt.state.jobs.get(job_id), accepted_message(rt, job_id)
    extraction = extract(message)
    who = [job.tenant, job.user_id, job.session_id, job.message_id]
    rt.state.client.hset(keys.job(job_id), mapping={
        "state": "extracted", "who": json.dumps(who), "accepted_at": job.accepted_at,
        "done:extract": job.stages["extract"], "events": json.dumps(job.event_ids), "branches": 2,
        "payload": message.model_dump_json(),
        "work": JobWork(mode="full", events=extraction.events, facts=extraction.facts).model_dump_json()})
    rt.state.client.zadd(keys.pending(ids.job_shard(job_id)), {job_id: job.accepted_at})
    return message
