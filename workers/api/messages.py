"""Working memory: append a message (and queue it for long-term memory: ``workers.api.sends``), read a
session, undo.

These handlers are ``async`` though they call Redis synchronously: each is one sub-millisecond Redis step
(a child's text also fetches its key), and running it on the event loop costs less than handing it to a worker
thread — the hand-off was half of the API's CPU per POST (2.0 → 0.95 ms in process). Reads that compute
(recall, profiles) stay sync and run in the thread pool.
"""

from __future__ import annotations

import uuid
from typing import Any

from mneme_client.models import (
    DeletionReceipt,
    ErrorBody,
    FullMessage,
    MessageAccepted,
    MessagesAccepted,
    RolledBack,
    SessionView,
)

from memory import ids
from memory.errors import Conflict, InvalidInput, TransientError
from memory.logs import request_id
from memory.mneme import Mneme
from memory.state.working import RetractTask
from memory.text import clean
from tasks.envelope import task_message
from workers.api.deps import ExtractionSends, Memory, OperatorId, PathId, Tenant, resource_router
from workers.api.requests import MessageIn, MessagesIn, RollbackIn
from workers.api.sends import Extractions
from workers.api.wire import out
from workers.celery_app import ROUTES

EXTRACT_QUEUE = ROUTES["memory.extract"]
router = resource_router()


_FULL_LINE: dict[int | str, dict[str, Any]] = {429: {
    "model": ErrorBody,
    "description": "The tenant's line into the pipeline is full (or the API key's rate limit is used up): retry after "
                   "`Retry-After` seconds."}}


@router.post("/v1/messages", status_code=202, response_model=MessageAccepted, tags=["write"], responses=_FULL_LINE)
async def post_message(tenant: Tenant, mneme: Memory, extractions: ExtractionSends, body: MessageIn,
                       window: bool = False) -> MessageAccepted:
    """Append a message to the session's working memory and queue it for long-term memory. With
    `window=true` the answer carries the session's window too (what an agent puts in its next prompt),
    read in the same Redis step."""
    _check(mneme, body)
    extractions.check(tenant)  # 429 while the tenant's line is full: nothing of the message is accepted
    return _accept(tenant, mneme, extractions, body, window)


@router.post("/v1/messages/batch", status_code=202, response_model=MessagesAccepted, tags=["write"],
             responses=_FULL_LINE)
async def post_messages(tenant: Tenant, mneme: Memory, extractions: ExtractionSends,
                        body: MessagesIn) -> MessagesAccepted:
    """Many messages in one request (a conversation's turn, a history imported), each accepted as by
    `POST /v1/messages`, in the order sent. All are checked first: an invalid one is a 4xx naming it
    (`messages[i]`), and none is accepted. Each message's append is then its own atomic step: one that
    conflicts (409: its id reused with other content, a session of another user) or a 503 stops the batch
    there, naming it, with the ones before it accepted — send the batch again (mended), and those answer
    `duplicate: true`."""
    for i, message in enumerate(body.messages):
        _check(mneme, message, f"messages[{i}]: ")
    extractions.check(tenant)
    accepted = []
    for i, message in enumerate(body.messages):
        try:
            accepted.append(_accept(tenant, mneme, extractions, message))
        except (Conflict, TransientError) as exc:
            raise type(exc)(f"messages[{i}]: {exc.message} (the {i} before it are accepted: sending the batch "
                            f"again is safe)") from exc
    return MessagesAccepted(accepted=accepted)


def _check(mneme: Mneme, body: MessageIn, where: str = "") -> None:
    limit = mneme.settings.content_max_chars
    if len(body.content) > limit:
        raise InvalidInput(f"{where}content has {len(body.content)} characters; the limit is {limit}: split it")
    if not clean(body.content):
        raise InvalidInput(f"{where}content is empty after cleaning: send some text")


def _accept(tenant: str, mneme: Mneme, extractions: Extractions, body: MessageIn,
            window: bool = False) -> MessageAccepted:
    """The message appended to its session's window, and its job sent on (unless a retry's)."""
    job_id = ids.job_id(tenant, body.session_id, body.message_id)
    if body.device_id:
        mneme.state.devices.bind(tenant, body.device_id, body.user_id)
    # child mode is checked inside the same Redis step; only a child's key is fetched (and its text sealed)
    accepted = mneme.working.append(
        tenant=tenant, user_id=body.user_id, session_id=body.session_id, message_id=body.message_id,
        role=body.role, content=body.content, client_ts=body.client_ts, job_id=job_id,
        device_id=body.device_id, child_seal_key=lambda: mneme.user_keys.get(tenant, body.user_id), read_back=window,
    )
    if not accepted.duplicate:
        extractions.add(tenant, job_id, request_id.get())
    return MessageAccepted(
        job_id=job_id, version=accepted.version, session_id=body.session_id, message_id=body.message_id,
        duplicate=accepted.duplicate, in_window=accepted.in_window, client_ts=accepted.message.client_ts,
        window=out(SessionView, accepted.window or mneme.working.read(tenant, body.session_id)) if window else None,
    )


@router.get("/v1/sessions/{session_id}/messages", response_model=SessionView, tags=["working memory"])
async def get_messages(tenant: Tenant, mneme: Memory, session_id: PathId, version: int | None = None) -> SessionView:
    """The session's working memory at its head version, or at an older kept version."""
    return out(SessionView, mneme.working.read(tenant, session_id, version))


@router.get("/v1/sessions/{session_id}/messages/{message_id}", response_model=FullMessage,
              tags=["working memory"])
async def get_message(tenant: Tenant, mneme: Memory, session_id: PathId, message_id: PathId) -> FullMessage:
    """One message with its full text (a long assistant reply is stored cut in the window)."""
    record, full = mneme.working.get(tenant, session_id, message_id)
    return FullMessage(**record.model_dump(exclude={"content"}), content=full)


@router.post("/v1/sessions/{session_id}/rollback", response_model=RolledBack, tags=["working memory"])
async def rollback(tenant: Tenant, mneme: Memory, session_id: PathId, body: RollbackIn) -> RolledBack:
    """Undo (撤回上一条: take the latest message still in the window out, each call one more; 409 once the
    window is empty) or restore a whole kept snapshot (``to_version``). Every message taken out is
    retracted: its queued work is dropped, and ``memory.retract`` (queued in the same Redis step)
    removes its episodic events and graph evidence. Its ``message_id`` is not accepted again."""
    return out(RolledBack, mneme.working.rollback(tenant, session_id, None if body.undo_last else body.to_version,
                                                  task=retraction_task(tenant, session_id)))


def retraction_task(tenant: str, session_id: str) -> RetractTask:
    """The ``memory.retract`` task of messages a step took back (a rollback, a session's deletion), on the
    extract queue: an extraction that runs after it finds its message retracted and does nothing."""
    def task(message_ids: list[str], user_id: str) -> tuple[str, str]:
        kwargs = {"tenant": tenant, "user_id": user_id, "session_id": session_id, "message_ids": message_ids}
        return task_message("memory.retract", str(uuid.uuid4()), kwargs, EXTRACT_QUEUE, request_id.get())

    return task


@router.delete("/v1/sessions/{session_id}/messages/{message_id}", response_model=DeletionReceipt,
               tags=["working memory"])
def delete_message(tenant: Tenant, mneme: Memory, session_id: PathId, message_id: PathId,
                   operator_id: OperatorId = "user") -> DeletionReceipt:
    """Take one message back (撤回 that message, wherever it is — the undo takes only the latest): out of the
    window (a new version), and what long-term memory made of it, following provenance — its events go, a
    belief only it supported is removed, one others support is re-scored. Its id is not accepted again; work
    still queued for it is dropped. The receipt lists it (empty if it was taken back before). Audited."""
    return out(DeletionReceipt, mneme.privacy.delete_message(tenant, session_id, message_id, operator_id,
                                                             task=retraction_task(tenant, session_id)))


@router.delete("/v1/sessions/{session_id}", response_model=DeletionReceipt, tags=["working memory"])
def delete_session(tenant: Tenant, mneme: Memory, session_id: PathId,
                   operator_id: OperatorId = "user") -> DeletionReceipt:
    """Delete a session: its working memory (the window and every kept version), and what long-term memory
    made of every message it took, following provenance — its events go (what other messages said stays), a
    belief only its messages supported is removed, one others support too is re-scored from what remains.
    Work still queued for it is dropped; its message ids are not accepted again. The receipt lists what was
    removed and re-scored. Audited."""
    return out(DeletionReceipt, mneme.privacy.delete_session(tenant, session_id, operator_id,
                                                             task=retraction_task(tenant, session_id)))
