"""Every endpoint of the API, once: what to send and how to read the answer (a ``Call``). The sync and the
async client each run these (``_client``), so neither repeats them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from mneme_client.models import (
    Belief,
    BeliefHistory,
    ConsentChange,
    DeletionReceipt,
    Events,
    EventType,
    FeedbackResult,
    FullMessage,
    Health,
    JobStatus,
    MessageAccepted,
    MessagesAccepted,
    Metrics,
    PageLink,
    Policy,
    Profile,
    Purposes,
    Reads,
    RecallResult,
    Receipt,
    Review,
    Role,
    RolledBack,
    Sessions,
    SessionView,
    VocabularyOut,
)

T = TypeVar("T")
_REVIEWS = TypeAdapter(list[Review])
_BELIEFS = TypeAdapter(list[Belief])


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its answer becomes ``T``. ``answers``: statuses whose body is the answer (a
    not-ready ``/healthz`` answers 503 with a body worth reading)."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Mapping[str, Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    answers: tuple[int, ...] = ()


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def _model(cls: type[T]) -> Callable[[Any], T]:
    return lambda body: cls.model_validate(body)  # type: ignore[attr-defined]


# --- working memory ------------------------------------------------------------------------------------------

def remember(*, user_id: str, session_id: str, message_id: str, content: str, role: Role | str = Role.user,
             client_ts: float | datetime | None = None, device_id: str | None = None,
             window: bool = False) -> Call[MessageAccepted]:
    """Append a message to the session's working memory and queue it for long-term memory (a harmless retry
    when sent again with the same ``message_id``). ``role``: user, assistant, system or tool (system and tool
    messages stay the session's context, never memory). ``window``: the answer carries the session's window."""
    body = _message(user_id=user_id, session_id=session_id, message_id=message_id, content=content, role=role,
                    client_ts=client_ts, device_id=device_id)
    return Call("POST", "/v1/messages", _model(MessageAccepted), json=body, params={"window": window or None})


def remember_many(messages: Sequence[Mapping[str, Any]]) -> Call[MessagesAccepted]:
    """Many messages in one request (a turn, a history imported; up to 100), each a mapping of ``remember``'s
    arguments (``client_ts`` now and ``role`` user unless given). All are checked before any is accepted; sent
    again, the ones accepted before answer ``duplicate``. The answers come in the order sent."""
    return Call("POST", "/v1/messages/batch", _model(MessagesAccepted),
                json={"messages": [_message(**message) for message in messages]})


def _message(*, user_id: str, session_id: str, message_id: str, content: str, role: Role | str = Role.user,
             client_ts: float | datetime | None = None, device_id: str | None = None) -> dict[str, Any]:
    ts = client_ts if client_ts is not None else time.time()
    return {"user_id": user_id, "session_id": session_id, "message_id": message_id, "role": str(role),
            "content": content, "client_ts": ts.isoformat() if isinstance(ts, datetime) else ts,
            "device_id": device_id}


def messages(session_id: str, version: int | None = None) -> Call[SessionView]:
    """The session's working window at its head, or at an older kept version."""
    return Call("GET", _path("v1", "sessions", session_id, "messages"), _model(SessionView),
                params={"version": version})


def message(session_id: str, message_id: str) -> Call[FullMessage]:
    """One message with its full text (a long reply is kept cut in the window)."""
    return Call("GET", _path("v1", "sessions", session_id, "messages", message_id), _model(FullMessage))


def rollback(session_id: str, to_version: int | None = None) -> Call[RolledBack]:
    """Undo the latest message (撤回上一条; each call one more), or restore the kept version ``to_version``."""
    body = {"undo_last": True} if to_version is None else {"to_version": to_version}
    return Call("POST", _path("v1", "sessions", session_id, "rollback"), _model(RolledBack), json=body)


def delete_message(session_id: str, message_id: str, operator_id: str = "user") -> Call[DeletionReceipt]:
    """Take one message back (撤回 that message, not only the latest): out of the window and out of long-term
    memory, re-scoring what it supported; the receipt says what went."""
    return Call("DELETE", _path("v1", "sessions", session_id, "messages", message_id), _model(DeletionReceipt),
                params={"operator_id": operator_id})


def delete_session(session_id: str, operator_id: str = "user") -> Call[DeletionReceipt]:
    """Delete a session and what long-term memory made of its messages; the receipt says what went."""
    return Call("DELETE", _path("v1", "sessions", session_id), _model(DeletionReceipt),
                params={"operator_id": operator_id})


def sessions(user_id: str, limit: int = 50, cursor: str | None = None) -> Call[Sessions]:
    """The user's sessions in working memory, most recently written first (``next_cursor`` pages on)."""
    return Call("GET", _path("v1", "users", user_id, "sessions"), _model(Sessions),
                params={"limit": limit, "cursor": cursor})


# --- recall and episodic memory ------------------------------------------------------------------------------

def recall(*, user_id: str, query: str, k: int = 5, session_id: str | None = None,
           event_types: list[EventType | str] | None = None, include_text: bool = False,
           purpose: str | None = None, min_relevance: float = 0.0) -> Call[RecallResult]:
    """Working memory, episodic events and beliefs for a query, each with where it came from and why.
    ``purpose``: only what was collected under a grant of it (None: any purpose the user granted);
    ``min_relevance``: leave out events less relevant (0: the best k; each event says its relevance and weak)."""
    body = {"user_id": user_id, "query": query, "k": k, "session_id": session_id,
            "event_types": [str(t) for t in event_types] if event_types else None, "include_text": include_text,
            "purpose": purpose, "min_relevance": min_relevance}
    return Call("POST", "/v1/recall", _model(RecallResult), json=body)


def events(user_id: str, limit: int = 50, cursor: str | None = None, event_types: list[EventType | str] | None = None,
           tiers: list[str] | None = None, message_ids: list[str] | None = None, session_id: str | None = None,
           include_text: bool = False) -> Call[Events]:
    """The user's episodic events, newest first (``next_cursor`` pages on); ``tiers``: event and/or deep;
    ``message_ids`` match every session's messages of those ids unless ``session_id`` names one."""
    return Call("GET", _path("v1", "users", user_id, "events"), _model(Events), params={
        "limit": limit, "cursor": cursor, "event_type": [str(t) for t in event_types] if event_types else None,
        "tier": tiers, "message_id": message_ids, "session_id": session_id, "include_text": include_text or None})


def delete_events(user_id: str, event_type: EventType | str, operator_id: str = "user") -> Call[DeletionReceipt]:
    """Delete every event of one type, and what their messages alone supported; the receipt says what went."""
    return Call("DELETE", _path("v1", "users", user_id, "events"), _model(DeletionReceipt),
                params={"event_type": str(event_type), "operator_id": operator_id})


# --- semantic memory -----------------------------------------------------------------------------------------

def profile(user_id: str, include_inactive: bool = False, purpose: str | None = None) -> Call[Profile]:
    """What the agent believes about the user (effective confidence, source, purposes, why) and open reviews."""
    return Call("GET", _path("v1", "users", user_id, "profile"), _model(Profile),
                params={"include_inactive": include_inactive or None, "purpose": purpose})


def correct(user_id: str, relation: str, object: str, confidence: float = 0.95,  # noqa: A002 - the API's name
            operator_id: str = "user") -> Call[Belief]:
    """Set a belief as the user states it: source human, wins over later extraction."""
    return Call("PUT", _path("v1", "users", user_id, "beliefs"), _model(Belief), json={
        "relation": relation, "object": object, "confidence": confidence, "operator_id": operator_id})


def delete_belief(user_id: str, rel_id: str, operator_id: str = "user") -> Call[str]:
    """Delete a belief (kept with its evidence for the audit); the rel id deleted."""
    return Call("DELETE", _path("v1", "users", user_id, "beliefs", rel_id), lambda body: str(body["deleted"]),
                params={"operator_id": operator_id})


def history(user_id: str, rel_id: str) -> Call[BeliefHistory]:
    """How one belief's confidence moved over time (its steps), and what it decays from."""
    return Call("GET", _path("v1", "users", user_id, "beliefs", rel_id, "history"), _model(BeliefHistory))


def reviews(user_id: str) -> Call[list[Review]]:
    """Contradictions waiting for a human."""
    return Call("GET", _path("v1", "users", user_id, "reviews"), _REVIEWS.validate_python)


def resolve(user_id: str, review_id: str, keep: list[str], operator_id: str = "user") -> Call[list[Belief]]:
    """Keep the claims (rel ids) that are true; the others are deleted. The user's beliefs after."""
    return Call("POST", _path("v1", "users", user_id, "reviews", review_id, "resolve"), _BELIEFS.validate_python,
                json={"keep": keep, "operator_id": operator_id})


def vocabulary() -> Call[VocabularyOut]:
    """The relations this deployment keeps about a user."""
    return Call("GET", "/v1/vocabulary", _model(VocabularyOut))


# --- privacy -------------------------------------------------------------------------------------------------

def purposes() -> Call[list[str]]:
    """The purposes a user consents to one by one."""
    return Call("GET", "/v1/purposes", lambda body: Purposes.model_validate(body).purposes)


def policy(user_id: str) -> Call[Policy]:
    """The user's consent (per purpose) and child mode."""
    return Call("GET", _path("v1", "users", user_id, "consent"), _model(Policy))


def consent(user_id: str, long_term: bool = True, purposes: list[str] | None = None,
            operator_id: str = "user") -> Call[ConsentChange]:
    """Opt the user in to (or pause) long-term memory, for ``purposes`` (None: every purpose when opting in,
    as they are when pausing). A purpose left out that was granted is withdrawn: ``withdrawal`` says what went."""
    return Call("PUT", _path("v1", "users", user_id, "consent"), _model(ConsentChange), json={
        "long_term": long_term, "purposes": purposes, "operator_id": operator_id})


def grant(user_id: str, purpose: str, operator_id: str = "user") -> Call[Policy]:
    """Grant one purpose (and long-term memory with it)."""
    return Call("PUT", _path("v1", "users", user_id, "consent", purpose), _model(Policy),
                params={"operator_id": operator_id})


def withdraw(user_id: str, purpose: str, operator_id: str = "user") -> Call[DeletionReceipt]:
    """Withdraw one purpose: what then serves no purpose is removed; the receipt says what went."""
    return Call("DELETE", _path("v1", "users", user_id, "consent", purpose), _model(DeletionReceipt),
                params={"operator_id": operator_id})


def set_child(user_id: str, child: bool = True, operator_id: str = "user") -> Call[Policy]:
    """Child mode (under 13): no beliefs, content-free events, working memory sealed."""
    return Call("PUT", _path("v1", "users", user_id, "child"), _model(Policy),
                json={"child": child, "operator_id": operator_id})


def erase(user_id: str, operator_id: str = "user") -> Call[Receipt]:
    """Erase the user from every layer; the receipt says what was removed where."""
    return Call("DELETE", _path("v1", "users", user_id), _model(Receipt), params={"operator_id": operator_id})


def page_link(user_id: str, ttl_s: int = 3600) -> Call[PageLink]:
    """A link to the user's memory page (记忆透明度), to give to that user only: it opens their page, nothing else."""
    return Call("POST", _path("v1", "users", user_id, "page-link"), _model(PageLink), params={"ttl_s": ttl_s})


def export(user_id: str) -> Call[dict[str, Any]]:
    """Everything kept about the user, as one document."""
    return Call("GET", _path("v1", "users", user_id, "export"), dict)


def reads(user_id: str, limit: int = 50, before: float | None = None) -> Call[Reads]:
    """Who saw what about the user, newest first (``next_before`` pages on)."""
    return Call("GET", _path("v1", "users", user_id, "reads"), _model(Reads), params={"limit": limit, "before": before})


# --- feedback, jobs, health ----------------------------------------------------------------------------------

def feedback(*, user_id: str, useful: bool, event_id: str | None = None, rel_id: str | None = None,
             query: str | None = None, operator_id: str = "user") -> Call[FeedbackResult]:
    """Was a recalled event (``event_id``) or belief (``rel_id``) useful?"""
    return Call("POST", "/v1/feedback", _model(FeedbackResult), json={
        "user_id": user_id, "useful": useful, "event_id": event_id, "rel_id": rel_id, "query": query,
        "operator_id": operator_id})


def metrics() -> Call[Metrics]:
    """The tenant's product metrics."""
    return Call("GET", "/v1/metrics/product", _model(Metrics))


def job(job_id: str) -> Call[JobStatus]:
    """A message's pipeline job: accepted → extracted → done (or failed, dropped, retracted)."""
    return Call("GET", _path("v1", "jobs", job_id), _model(JobStatus))


def health() -> Call[Health]:
    """Whether the API, Redis and the stores answer, and the pipeline's state."""
    return Call("GET", "/healthz", _model(Health), answers=(503,))


ENDED = frozenset({"done", "failed", "dropped", "retracted"})  # a job in one of these has nothing left to do
