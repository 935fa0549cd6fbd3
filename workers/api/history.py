"""A user's memory, listed page by page, newest first: their sessions still in working memory and their
episodic events of both tiers. What a listing shows is recorded as read by the caller (``memory.services.reads``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from mneme_client.models import Events, ListedEvent, Sessions, SessionSummary

from memory.errors import InvalidInput
from memory.models import ID_PATTERN
from workers.api.deps import Caller, Memory, PathId, resource_router
from workers.api.requests import EventType
from workers.api.wire import out_all

router = resource_router()
MAX_MESSAGE_IDS = 100
Limit = Annotated[int, Query(ge=1, le=200, description="How many to return.")]
Cursor = Annotated[str | None, Query(max_length=300, description="The previous page's next_cursor.")]


def _cursor(value: str | None) -> tuple[float, str] | None:
    """A page's cursor: ``<ts>|<id>`` of the last item of the page before."""
    if value is None:
        return None
    ts, sep, key = value.partition("|")
    try:
        return float(ts), key if sep else ""
    except ValueError:
        raise InvalidInput("cursor is not one this API gave: pass the previous page's next_cursor as it is") from None


@router.get("/v1/users/{user_id}/sessions", response_model=Sessions, tags=["working memory"])
def sessions(caller: Caller, mneme: Memory, user_id: PathId, limit: Limit = 50, cursor: Cursor = None) -> Sessions:
    """The user's sessions still in working memory (within the session TTL), the most recently written first:
    each with its head version, how many messages its window holds and when they were written."""
    after = _cursor(cursor)
    found = [s for s in mneme.working.sessions_of(caller.tenant, user_id)
             if after is None or ((s.last_ts or 0.0), s.session_id) < after]
    page = found[:limit]
    mneme.reads.listed(caller, user_id, "sessions", [s.session_id for s in page])
    return Sessions(user_id=user_id, sessions=out_all(SessionSummary, page),
                    next_cursor=f"{page[-1].last_ts or 0.0!r}|{page[-1].session_id}" if len(found) > limit else None)


@router.get("/v1/users/{user_id}/events", response_model=Events, tags=["episodic memory"])
def events(caller: Caller, mneme: Memory, user_id: PathId, limit: Limit = 50, cursor: Cursor = None,
           event_type: Annotated[list[EventType] | None, Query(description="Only these types.")] = None,
           tier: Annotated[list[str] | None, Query(description="event (the live layer) and/or deep; default both.")]
           = None,
           message_id: Annotated[list[str] | None, Query(description=(
               "Only the events made from these messages. An id names a message within its session: without "
               "session_id, the events of every session's message of that id."))] = None,
           session_id: Annotated[str | None, Query(pattern=ID_PATTERN, description=(
               "Only the events made in this session (a message merged into an event of another session is "
               "listed as its own row here, its canonical_id naming that event)."))] = None,
           include_text: bool = False) -> Events:
    """The user's episodic events, newest first: type, tier, summary and keywords (the full text with
    ``include_text``), the session and messages each was made from and the grants it was collected under."""
    if message_id is not None and len(message_id) > MAX_MESSAGE_IDS:
        raise InvalidInput(f"{len(message_id)} message ids: ask for at most {MAX_MESSAGE_IDS} at a time")
    tiers = tier or ["event", "deep"]
    if unknown := set(tiers) - {"event", "deep"}:
        raise InvalidInput(f"unknown tier(s) {sorted(unknown)}: use event and/or deep")
    found = mneme.episodic.page(caller.tenant, user_id, types=event_type, tiers=tiers, message_ids=message_id,
                                session_id=session_id, before=_cursor(cursor), limit=limit + 1,
                                include_text=include_text)
    page = found[:limit]
    mneme.reads.listed(caller, user_id, "events", [e.event_id for e in page])
    return Events(user_id=user_id, events=out_all(ListedEvent, page),
                  next_cursor=f"{page[-1].ts!r}|{page[-1].event_id}" if len(found) > limit else None)
