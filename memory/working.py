"""Working memory: the last N cleaned messages of a session in Redis, versioned for rollback.

Each change is one Lua step (``working.lua``): concurrent writers never lose a message, and a
rollback restores a whole snapshot at once. Accepting a message also records its pipeline job in
the same step, so nothing accepted can be lost between Redis and the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources

import redis
from pydantic import BaseModel

from memory import keys, telemetry
from memory.crypto import SEALED_TEXT, open_text, seal_text
from memory.errors import Conflict, NotFound, TransientError
from memory.models import Message, Role
from memory.settings import Settings
from memory.text import clean, sha256, truncate_reply

_LUA = resources.files("memory").joinpath("working.lua").read_text(encoding="utf-8")
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


class StoredMessage(BaseModel):
    message_id: str
    session_id: str
    role: Role
    content: str
    client_ts: float
    received_at: float
    device_id: str | None = None
    truncated: bool = False
    version: int
    seq: int


class Accepted(BaseModel):
    message: Message
    version: int
    in_window: bool
    duplicate: bool


class SessionView(BaseModel):
    session_id: str
    head: int
    version: int
    messages: list[StoredMessage]


class RolledBack(BaseModel):
    session_id: str
    version: int
    restored: int
    removed: list[StoredMessage]


class WorkingMemory:
    """``seal_key(tenant, user_id)`` gives the key to encrypt a child's messages with (None: plaintext);
    ``open_key(tenant, user_id)`` the key to read them back (None once the user is erased)."""

    def __init__(self, client: redis.Redis, settings: Settings,
                 open_key: Callable[[str, str], bytes | None] = lambda tenant, user_id: None) -> None:
        self._redis = client
        self._settings = settings
        self._script = client.register_script(_LUA)
        self._open_key = open_key

    def _run(self, tenant: str, session_id: str, *args: object, job_id: str = "", user_id: str = "") -> list:
        k = keys.session(tenant, session_id)
        job_key = keys.job(job_id) if job_id else keys.job("-")
        sessions = keys.user_sessions(tenant, user_id) if user_id else keys.user_sessions(tenant, "-")
        try:
            with telemetry.observe_working(str(args[0])):  # args[0] is the op: append, read, rollback, get
                return self._script(keys=[*k.all(), job_key, keys.PENDING, sessions, keys.metrics(tenant)],
                                    args=list(args))
        except REDIS_ERRORS as exc:
            raise TransientError(f"working memory unavailable: {exc}") from exc

    def append(
        self,
        *,
        tenant: str,
        user_id: str,
        session_id: str,
        message_id: str,
        role: Role,
        content: str,
        client_ts: float,
        job_id: str,
        device_id: str | None = None,
        seal_key: bytes | None = None,
    ) -> Accepted:
        """Append a message. With ``seal_key`` (child mode) its text is stored encrypted at rest, in the
        window, the full-text store and the queued job alike."""
        s = self._settings
        now = round(time.time(), 3)
        ts = round(min(client_ts, now + s.max_clock_skew_s), 3)
        text = clean(content)
        shown, truncated = (text, False)
        if role is Role.assistant:
            shown, truncated = truncate_reply(text, s.assistant_max_chars)
        context = f"{session_id}\x1f{message_id}"
        protect = (lambda t: seal_text(seal_key, t, context)) if seal_key else (lambda t: t)
        message = Message(
            tenant=tenant, user_id=user_id, session_id=session_id, device_id=device_id,
            message_id=message_id, role=role, content=protect(text), client_ts=ts, received_at=now,
        )
        record = StoredMessage(
            message_id=message_id, session_id=session_id, role=role, content=protect(shown), client_ts=ts,
            received_at=now, device_id=device_id, truncated=truncated, version=0, seq=0,
        )
        digest = sha256(text)
        reply = self._run(
            tenant, session_id, "append", user_id, message_id, digest, record.model_dump_json(), ts,
            protect(text) if truncated else "", s.window_size, s.versions_kept, s.session_ttl_s,
            message.model_dump_json(), s.job_ttl_s, now, job_id, session_id, job_id=job_id, user_id=user_id,
        )
        status = reply[0]
        if status == "owner":
            raise Conflict(f"session {session_id!r} belongs to another user; use a new session_id")
        if status == "dup":
            if reply[2] != digest:
                raise Conflict(
                    f"message_id {message_id!r} was already used in this session for other content; "
                    "send a new message_id"
                )
            return Accepted(message=message, version=int(reply[1]), in_window=True, duplicate=True)
        message.version = int(reply[1])
        return Accepted(message=message, version=message.version, in_window=bool(reply[2]), duplicate=False)

    def read(self, tenant: str, session_id: str, version: int | None = None) -> SessionView:
        reply = self._run(tenant, session_id, "read", "" if version is None else version)
        self._raise_for(reply, session_id, version)
        return SessionView(
            session_id=session_id, head=int(reply[1]), version=int(reply[2]),
            messages=self._opened(tenant, reply[4], [StoredMessage.model_validate_json(r) for r in reply[3] if r]),
        )

    def _opened(self, tenant: str, user_id: str, records: list[StoredMessage]) -> list[StoredMessage]:
        if not any(r.content.startswith(SEALED_TEXT) for r in records):
            return records
        key = self._open_key(tenant, user_id)
        return [r.model_copy(update={"content": open_text(key, r.content, f"{r.session_id}\x1f{r.message_id}")
                                     or "[erased]"}) for r in records]

    def rollback(self, tenant: str, session_id: str, to_version: int | None = None) -> RolledBack:
        """Restore the snapshot of ``to_version`` (or the one before the last change) as a new version."""
        target = "undo" if to_version is None else to_version
        s = self._settings
        reply = self._run(tenant, session_id, "rollback", target, s.versions_kept, s.session_ttl_s)
        self._raise_for(reply, session_id, to_version)
        return RolledBack(
            session_id=session_id, version=int(reply[1]), restored=int(reply[2]),
            removed=self._opened(tenant, reply[4], [StoredMessage.model_validate_json(r) for r in reply[3] if r]),
        )

    def get(self, tenant: str, session_id: str, message_id: str) -> tuple[StoredMessage, str]:
        """One message with its full text (a cut assistant reply comes back whole)."""
        reply = self._run(tenant, session_id, "get", message_id)
        if reply[0] == "missing":
            raise NotFound(f"no message {message_id!r} in session {session_id!r}")
        if reply[0] == "gone":
            raise NotFound(f"message {message_id!r} has left working memory; search long-term memory instead")
        [record] = self._opened(tenant, reply[3], [StoredMessage.model_validate_json(reply[1])])
        full = reply[2] or record.content
        return record, open_text(self._open_key(tenant, reply[3]), full, f"{session_id}\x1f{message_id}") or full

    def _raise_for(self, reply: list, session_id: str, version: int | None) -> None:
        status = reply[0]
        if status == "nosession":
            raise NotFound(f"no session {session_id!r} (never written, or expired)")
        if status == "range":
            raise NotFound(f"session {session_id!r} has versions 0..{reply[1]}; {version} is not one of them")
        if status == "gone":
            kept = self._settings.versions_kept
            raise NotFound(
                f"version {version} of session {session_id!r} is no longer kept "
                f"(the newest {kept} versions are; head is {reply[1]})"
            )
