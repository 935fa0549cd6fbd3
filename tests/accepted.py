"""The message a job was accepted for, as the pipeline received it — read back from working memory (a
finished job keeps no copy of its text), for tests that replay or re-extract it."""

from __future__ import annotations

import json

from memory import keys
from memory.models import Message
from memory.runtime import Runtime


def accepted_message(rt: Runtime, job_id: str) -> Message:
    tenant, user_id, session_id, message_id = json.loads(rt.redis.hget(keys.job(job_id), "who"))
    record, full_text = rt.working.get(tenant, session_id, message_id)
    return Message(tenant=tenant, user_id=user_id, session_id=session_id, device_id=record.device_id,
                   message_id=message_id, role=record.role, content=full_text, client_ts=record.client_ts,
                   received_at=record.received_at)


def write_job(rt: Runtime, job_id: str, user_id: str = "u", session_id: str = "s", tenant: str = "default") -> None:
    """A job record as the API writes it, for a task sent straight to the broker (so a failing task has
    a job to mark failed)."""
    message = Message(tenant=tenant, user_id=user_id, session_id=session_id, message_id=job_id, role="user",
                      content="x", client_ts=1.0)
    rt.redis.hset(keys.job(job_id), mapping={
        "state": "accepted", "accepted_at": message.received_at, "payload": message.model_dump_json(),
        "who": json.dumps([tenant, user_id, session_id, job_id])})
