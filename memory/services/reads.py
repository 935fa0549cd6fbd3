"""Read audit: which of a user's memories were shown to which caller, and why.

Every recall, profile read and export builds one record — the caller (API key id, or ``development`` /
``cli``), the agent the caller names (``X-Mneme-Agent``), the session, and the ids of what was shown with
the reason for each (a recalled event's score parts, a fact's "mentioned in the query", "profile",
"export") — never content: no query, no text, no summary. The record goes through the audit trail's outbox
(``memory.services.trail``): in the API the request only holds it in Redis (one round trip) and the process
sends the held records of its reads a batch at a time (``workers.api.sends``) to a worker, which writes them
to the sink and to the read log off the request's path; a batch lost with its process is re-sent from the
outbox by the redrive. The read log (``memory.reads``) answers "who saw what about me", newest first; as a
store of user data (``memory.userdata``) it is erased and exported with the rest. The hash-chained trail
keeps its copy, which names the user only by their keyed hash.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.logs import request_id
from memory.reads import ReadLog
from memory.services.trail import AuditTrail
from memory.userhash import user_hash

Send = Callable[[list[dict[str, Any]]], None]  # read records held in the outbox → the task that writes them


@dataclass(frozen=True)
class Reader:
    """Who is reading: the tenant, the API key id (``development`` with auth off; ``cli``), the agent the
    caller names, through what (``api``, ``cli``), and how their reads' records reach a worker once held
    (``send``: the API process's batches, ``workers.api.sends``); without one they are written at once."""

    tenant: str
    caller: str
    agent: str | None = None
    via: str = "api"
    send: Send | None = None


class ReadAudit:
    name = "reads"

    def __init__(self, log: ReadLog, trail: AuditTrail, hash_key: bytes, enabled: bool = True) -> None:
        self._log, self._trail, self._hash_key, self._enabled = log, trail, hash_key, enabled

    # --- recording ----------------------------------------------------------------------------------
    def recalled(self, reader: Reader, user_id: str, session_id: str | None, working: Sequence[Any],
                 events: Sequence[Any], facts: Sequence[Any], purpose: str | None = None) -> None:
        """A recall's answer: the working-memory messages, events (with score parts) and facts it returned, and
        the purpose it named."""
        self._submit(reader, user_id, "read.recall", session_id=session_id, purpose=purpose, shown={
            "messages": [m.message_id for m in working],
            "events": [{"id": e.event_id, "tier": e.tier, "message_ids": list(e.message_ids), "score": e.score,
                        "why": dict(e.why)} for e in events],
            "beliefs": [{"id": f.rel_id, "why": f.why} for f in facts]})

    def profiled(self, reader: Reader, user_id: str, beliefs: Sequence[Any], reviews: Sequence[Any],
                 purpose: str | None = None) -> None:
        self._submit(reader, user_id, "read.profile", purpose=purpose, shown={
            "beliefs": [{"id": b.rel_id, "why": "profile"} for b in beliefs],
            "reviews": [r.review_id for r in reviews]})

    def listed(self, reader: Reader, user_id: str, what: str, shown: Sequence[str]) -> None:
        """A listing of the user's ``what`` (sessions, events): the ids it showed."""
        self._submit(reader, user_id, "read.list", shown={what: list(shown), "why": "listed"})

    def exported(self, reader: Reader, user_id: str, counts: Mapping[str, int]) -> None:
        """An export shows everything kept: the record names how much of each store (``Privacy.verify``)."""
        self._submit(reader, user_id, "read.export", shown={"stores": dict(counts), "why": "export"})

    def _submit(self, reader: Reader, user_id: str, action: str, shown: dict[str, Any], **fields: object) -> None:
        """Record the read — unless it showed nothing of the user (an erased user, say: a record would be data
        about them again, and there is nothing to say who saw)."""
        if not self._enabled or not _showed_something(shown):
            return
        fields = {**fields, "shown": shown}
        identity = request_id.get() or str(uuid.uuid4())  # one record per request that read
        record = self._trail.record(reader.tenant, user_id, action, reader.caller, reader.via,
                                    identity=identity, fields={"agent": reader.agent, **fields})
        if reader.send is None:
            self._trail.submit([record])  # written now
        else:
            self._trail.hold([record])  # one round trip on the request's path; a worker writes it
            reader.send([record])

    # --- who saw what about the user (a store of user data) ----------------------------------------
    def of_user(self, tenant: str, user_id: str, limit: int = 50, before: float | None = None
                ) -> list[dict[str, Any]]:
        return self._log.of_user(tenant, self._user(tenant, user_id), limit, before)

    def count(self, tenant: str, user_id: str) -> int:
        return self._log.count(tenant, self._user(tenant, user_id))

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        return self._log.of_user(tenant, self._user(tenant, user_id), 1_000_000)

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: self._log.erase(tenant, self._user(tenant, user_id))}

    def ping(self) -> None:
        self._log.ping()

    def _user(self, tenant: str, user_id: str) -> str:
        return user_hash(self._hash_key, tenant, user_id)


def _showed_something(shown: dict[str, Any]) -> bool:
    """Whether a read's ``shown`` names anything of the user: an id listed, or a store with records."""
    return any(any(value.values()) if isinstance(value, dict) else bool(value)
               for key, value in shown.items() if key != "why")
