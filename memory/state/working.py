"""Working memory: the last N cleaned messages of a session in Redis, versioned for rollback.

Each change is one Lua step (``lua/sessions.lua``) on the keys of the session's shard: concurrent writers
never lose a message, and a rollback restores a whole snapshot at once. Accepting a message also records its
pipeline job, pending, in the same step; its first task then goes onto the broker (``memory.state.dispatch``),
and a job whose task never got there is re-sent by the redrive, so nothing accepted is lost between Redis
and the queue. A rollback records its retraction in its step the same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter
from redis.typing import EncodableT

from memory import ids, telemetry
from memory.crypto import SEALED_TEXT, keyed_hash, open_text, seal_text
from memory.errors import Conflict, NotFound
from memory.models import Message, Role
from memory.settings import Settings
from memory.state import keys
from memory.state.client import decoded, scored
from memory.state.counters import Counters
from memory.state.dispatch import Dispatch
from memory.state.fairness import FairShare
from memory.state.jobs import Jobs
from memory.state.lua import script
from memory.state.policy import Policies
from memory.text import clean, sha256, truncate_reply

_LUA = script("jobs.lua", "counters.lua", "sessions.lua")
DIGEST_CHARS = 32  # of the content's sha256 hex, kept per message id to tell a retry from a reused id
KEYED = "k"  # starts a child's digest: keyed by their key, as their text is sealed (no dictionary reverses it)


def _keyed_digest(key: bytes, digest: str) -> str:
    return KEYED + keyed_hash(key, digest)[:DIGEST_CHARS - 1]


def _digest(text: str, seal_key: bytes | None) -> str:
    """What tells a retry from a reused message id: the text's sha256 prefix, keyed for a child."""
    digest = sha256(text)[:DIGEST_CHARS]
    return _keyed_digest(seal_key, digest) if seal_key else digest
SEEN_SESSIONS = 10_000  # sessions a process remembers appending to (~2.5 MB at most), then it starts afresh


def _short(name: str, key: str) -> Any:  # a required field, also read from its short key in stored records
    return Field(validation_alias=AliasChoices(name, key))


class StoredMessage(BaseModel):
    model_config = ConfigDict(validate_by_name=True)  # as the aliases do: each field's choices start with its name

    message_id: str = _short("message_id", "m")
    session_id: str
    role: Role = _short("role", "r")
    content: str = _short("content", "c")
    client_ts: float = _short("client_ts", "t")
    received_at: float = _short("received_at", "a")
    device_id: str | None = Field(None, validation_alias=AliasChoices("device_id", "d"))
    truncated: bool = Field(False, validation_alias=AliasChoices("truncated", "x"))
    version: int = _short("version", "v")
    seq: int = _short("seq", "s")


_RECORDS = TypeAdapter(list[StoredMessage])
RetractTask = Callable[[list[str], str], tuple[str, str]]  # (message ids, owner) → (broker list, task message)


class Retraction(BaseModel):
    """A rollback's retraction, as the step recorded it (``retracting``), until ``memory.retract`` is done."""

    tenant: str
    user_id: str
    session_id: str
    message_ids: list[str]

    def member(self) -> str:
        return "\x1f".join([self.tenant, self.user_id, self.session_id, ",".join(self.message_ids)])

    @classmethod
    def of(cls, member: str) -> Retraction:
        tenant, user_id, session_id, message_ids = member.split("\x1f")
        return cls(tenant=tenant, user_id=user_id, session_id=session_id, message_ids=message_ids.split(","))


def _pairs(flat: list[str]) -> dict[str, str]:
    """A hash as the script returns it (HGETALL: field, value, field, value…) → a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


class SessionView(BaseModel):
    session_id: str
    head: int
    version: int
    messages: list[StoredMessage]


class SessionSummary(BaseModel):
    """One of a user's sessions still in working memory, as a listing shows it."""

    session_id: str
    version: int = Field(description="The head version (rollback goes back from it).")
    messages: int = Field(description="Messages in the window at head.")
    first_ts: float | None = Field(description="client_ts of the window's oldest message.")
    last_ts: float | None = Field(description="client_ts of its newest message.")


class Accepted(BaseModel):
    message: Message
    version: int
    in_window: bool
    duplicate: bool
    window: SessionView | None = None  # with ``append(read_back=True)``: the window at the new head


class RolledBack(BaseModel):
    session_id: str
    version: int
    restored: int | None = Field(description="The version whose snapshot was restored (``to_version``); "
                                             "None for an undo, which takes one message out of the head's.")
    removed: list[StoredMessage] = Field(description="The messages the new version no longer holds: retracted, "
                                                     "with what long-term memory made of them.")


class WorkingMemory:
    """``seal_key(tenant, user_id)`` gives the key to encrypt a child's messages with (None: plaintext);
    ``open_key(tenant, user_id)`` the key to read them back (None once the user is erased)."""

    def __init__(self, client: redis.Redis, settings: Settings, jobs: Jobs, fair: FairShare, dispatch: Dispatch,
                 policies: Policies, counters: Counters,
                 open_key: Callable[[str, str], bytes | None] = lambda tenant, user_id: None) -> None:
        self._redis = client
        self._settings = settings
        self._jobs = jobs  # a session's messages' jobs, erased with it
        self._fair = fair  # and their places in the tenant's line
        self._dispatch = dispatch  # the tasks a step decides, onto the broker after it
        self._policies = policies  # whether a user is a child, read when their session starts
        self._counters = counters
        self._script = client.register_script(_LUA)
        self._keep_vector = client.register_script(script("vectors.lua"))
        self._open_key = open_key
        #: sessions this process has appended to (a hint, bounded): a message of another is read its user's child
        #: flag first, which a session starting needs — else the step asks for it, and runs again
        self._seen: set[tuple[str, str]] = set()

    def _run(self, tenant: str, session_id: str, *args: EncodableT, job_id: str = "", user_id: str = "",
             job_keys: Sequence[str] = ()) -> list[Any]:
        """One step of ``sessions.lua`` (``args[0]`` is the op) on the session's shard; its reply, a list."""
        with telemetry.observe_working(str(args[0])):  # args[0] is the op: append, read, rollback, get
            reply: list[Any] = self._script(keys=self._keys(tenant, session_id, job_id, user_id, job_keys), args=args)
        return reply

    @staticmethod
    def _keys(tenant: str, session_id: str, job_id: str = "", user_id: str = "",
              job_keys: Sequence[str] = ()) -> list[str]:
        """The keys a step of ``sessions.lua`` on the session may touch, all in the session's shard."""
        tag = ids.shard(tenant, session_id)
        job_key = keys.job(job_id or tag)  # a job id starts with its shard: a key of the shard either way
        shard_keys = [job_key, keys.pending(tag), keys.user_sessions(tenant, user_id or "-", tag),
                      keys.metrics(tenant, tag), keys.retracting(tag)]
        return [*keys.session(tenant, session_id).all(), *shard_keys, *job_keys]

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
        child_seal_key: Callable[[], bytes | None] | None = None,
        read_back: bool = False,
    ) -> Accepted:
        """Append a message.

        ``child_seal_key``: whether the user is a child is checked in the same Redis step (the session keeps
        the user's flag; the first message of a session reads the user's policy first), and only for a child
        is the key fetched (this callable) and the text sealed — stored encrypted at rest in the window, the
        full-text store and the queued job alike; one round trip for everyone else's messages.
        ``read_back``: the window at the new head comes back too (``Accepted.window``), still in one step.
        The step records the message's job as pending; its caller sends the extraction (the API:
        ``workers.api.sends``), and the redrive re-sends one that never reached the broker."""
        s = self._settings
        now = round(time.time(), 3)
        ts = round(min(client_ts, now + s.max_clock_skew_s), 3)
        text = clean(content)
        shown, truncated = (text, False)
        if role is not Role.user:  # a reply, instructions or a tool's output: shown cut, kept whole
            shown, truncated = truncate_reply(text, s.assistant_max_chars)
        seal_key: bytes | None = None
        check_child = child_seal_key is not None
        child = ""  # the user's flag as their policy says, read when a session starts (the step says so)
        if (tenant, session_id) not in self._seen:  # maybe starting: read now, not after a step that asks for it
            child = "1" if self._policies.is_child(tenant, user_id) else "0"
        context = f"{session_id}\x1f{message_id}"
        while True:
            protect = (lambda t, k=seal_key: seal_text(k, t, context)) if seal_key else (lambda t: t)
            digest = _digest(text, seal_key)
            stored_text = protect(text)
            message = Message(
                tenant=tenant, user_id=user_id, session_id=session_id, device_id=device_id,
                message_id=message_id, role=role, content=stored_text, client_ts=ts, received_at=now,
            )
            # the record without its leading timestamp, seq and version (the script puts those first)
            tail = (f'"a":{now!r},"m":{json.dumps(message_id, ensure_ascii=False)},"r":"{role.value}",'
                    f'"c":{json.dumps(protect(shown), ensure_ascii=False)}'
                    + (f',"d":{json.dumps(device_id, ensure_ascii=False)}' if device_id is not None else "")
                    + (',"x":true}' if truncated else "}"))
            fields = {  # named, as sessions.lua's 'append' reads them
                "user": user_id, "message_id": message_id, "digest": digest, "ts": repr(ts), "tail": tail,
                "full_text": stored_text if truncated else "", "window": s.window_size, "kept": s.versions_kept,
                "ttl": s.session_ttl_s, "session_id": session_id, "child": child, "check_child": check_child,
                "read_back": read_back, "job_id": job_id,
                "who": json.dumps([tenant, user_id, session_id, message_id], ensure_ascii=False),
                "payload": message.model_dump_json(exclude_defaults=True), "job_ttl": s.job_ttl_s, "now": repr(now),
            }
            reply = self._run(tenant, session_id, "append", json.dumps(fields, ensure_ascii=False),
                              job_id=job_id, user_id=user_id)
            if reply[0] == "policy":  # the session starts: the step needs the user's flag
                child = "1" if self._policies.is_child(tenant, user_id) else "0"
                continue
            if reply[0] != "child":
                break
            if child_seal_key is None:  # cannot happen: the script says 'child' only when asked to check
                raise RuntimeError(f"session {session_id!r}: the accept step asked for a child's key; none given")
            seal_key, check_child = child_seal_key(), False  # a child: seal, ask again
        if len(self._seen) >= SEEN_SESSIONS:
            self._seen.clear()
        self._seen.add((tenant, session_id))
        status = reply[0]
        if status == "retracted":
            raise Conflict(f"message_id {message_id!r} was taken back (撤回) in session {session_id!r}; "
                           "send it again with a new message_id")
        if status == "owner":
            raise Conflict(f"session {session_id!r} belongs to another user; use a new session_id")
        if status == "dup":
            if reply[2] != digest:
                raise Conflict(
                    f"message_id {message_id!r} was already used in this session for other content; "
                    "send a new message_id"
                )
            return Accepted(message=message, version=int(reply[1]), in_window=True, duplicate=True)
        if int(reply[3]):
            self._session_started(tenant, user_id, session_id, child == "0" and seal_key is None, child_seal_key)
        message.version = int(reply[1])
        accepted = Accepted(message=message, version=message.version, in_window=bool(reply[2]), duplicate=False)
        if read_back:
            accepted.window = SessionView(session_id=session_id, head=message.version, version=message.version,
                                          messages=self._opened(tenant, reply[5], self._parse(session_id, reply[4])))
        return accepted

    def _session_started(self, tenant: str, user_id: str, session_id: str, as_adult: bool,
                         child_seal_key: Callable[[], bytes | None] | None) -> None:
        """A message started a session of the user: they count as a user (or a returning one), and if they
        became a child since their policy was read for it, the session comes under child rules now — child
        mode, which flags and seals the user's sessions, may have read their sessions before this one was."""
        sessions, child = self._policies.session_started(tenant, user_id)
        self._counters.count_user(tenant, sessions)
        if as_adult and child and child_seal_key is not None and (key := child_seal_key()) is not None:
            self._run(tenant, session_id, "child", user_id, "1")
            self._seal_session(tenant, user_id, session_id, key)

    @staticmethod
    def _parse(session_id: str, raw: list[str]) -> list[StoredMessage]:
        """Stored records → messages, their session id given back (it is the key's, not stored)."""
        prefix = '{"session_id":' + json.dumps(session_id, ensure_ascii=False) + ","
        return _RECORDS.validate_json("[" + ",".join(prefix + r[1:] for r in raw if r) + "]")  # one call

    def read(self, tenant: str, session_id: str, version: int | None = None) -> SessionView:
        reply = self._run(tenant, session_id, "read", "" if version is None else version)
        self._raise_for(reply, session_id, version)
        return SessionView(
            session_id=session_id, head=int(reply[1]), version=int(reply[2]),
            messages=self._opened(tenant, reply[4], self._parse(session_id, reply[3])),
        )

    def sessions_of(self, tenant: str, user_id: str) -> list[SessionSummary]:
        """The user's sessions still in working memory, the most recently written first."""
        summaries = []
        for session_id in self.owned_sessions(tenant, user_id):
            try:
                view = self.read(tenant, session_id)
            except NotFound:  # expired since it was listed
                continue
            stamps = [m.client_ts for m in view.messages]
            summaries.append(SessionSummary(session_id=session_id, version=view.head, messages=len(stamps),
                                            first_ts=min(stamps, default=None), last_ts=max(stamps, default=None)))
        return sorted(summaries, key=lambda s: (s.last_ts or 0.0, s.session_id), reverse=True)

    def turns_before(self, messages: Sequence[tuple[str, str, str]]) -> list[StoredMessage | None]:
        """For each (tenant, session id, message id), the message just before it in the session's window
        (None: it is the first, out of the window, or the session is gone); one step a session, which
        returns only those records, all in one round trip."""
        sessions: dict[tuple[str, str], list[str]] = {}
        for tenant, session_id, message_id in messages:
            sessions.setdefault((tenant, session_id), []).append(message_id)
        pipe = self._redis.pipeline(transaction=False)
        for (tenant, session_id), message_ids in sessions.items():
            self._script(keys=self._keys(tenant, session_id), args=["before", *message_ids], client=pipe)
        with telemetry.observe_working("before"):
            replies = pipe.execute()
        found: dict[tuple[str, str, str], StoredMessage] = {}
        for ((tenant, session_id), message_ids), reply in zip(sessions.items(), replies, strict=True):
            if reply[0] == "nosession":
                continue
            wanted = [(m, record) for m, record in zip(message_ids, reply[2:], strict=True) if record]
            opened = self._opened(tenant, reply[1], self._parse(session_id, [record for _, record in wanted]))
            found |= {(tenant, session_id, m): turn for (m, _), turn in zip(wanted, opened, strict=True)}
        return [found.get(m) for m in messages]

    def keep_vectors(self, vectors: Sequence[tuple[str, str, str, str]]) -> None:
        """For each (tenant, session id, message id, vector as text), keep it as the vector of the session's
        newest turn for ``context_vector_ttl_s`` (never past the session's TTL), for ``kept_vectors``: the
        next turn's embedding adds a share of it, on whichever embed worker, without embedding it again. Not
        kept for a message taken back, in a child's session, or where a later turn's is already; one round
        trip."""
        ttl = min(self._settings.context_vector_ttl_s, self._settings.session_ttl_s)
        if not vectors or not ttl:
            return
        pipe = self._redis.pipeline(transaction=False)
        for tenant, session_id, message_id, vector in vectors:
            k = keys.session(tenant, session_id)
            self._keep_vector(keys=[k.meta, k.ids, k.vec], args=[ttl, message_id, vector], client=pipe)
        with telemetry.observe_working("vector"):
            pipe.execute()

    def kept_vectors(self, turns: Sequence[tuple[str, str, int]]) -> list[str]:
        """For each (tenant, session id, seq) of a turn, the vector ``keep_vectors`` kept of it ('' if none:
        never kept, a later turn's kept since, taken back, or expired); one round trip."""
        if not turns:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for tenant, session_id, seq in turns:
            pipe.hget(keys.session(tenant, session_id).vec, str(seq))
        return [decoded(vector) or "" for vector in pipe.execute()]

    def _opened(self, tenant: str, user_id: str, records: list[StoredMessage]) -> list[StoredMessage]:
        if not any(r.content.startswith(SEALED_TEXT) for r in records):
            return records
        key = self._open_key(tenant, user_id)
        return [r.model_copy(update={"content": open_text(key, r.content, f"{r.session_id}\x1f{r.message_id}")
                                     or "[erased]"}) for r in records]

    def rollback(self, tenant: str, session_id: str, to_version: int | None = None,
                 task: RetractTask | None = None) -> RolledBack:
        """Restore the snapshot of ``to_version`` as a new version, or (None) undo: a new version without
        the most recently appended message still in the window. Each message taken out is marked
        retracted in the same step, which also records the retraction; ``task(message_ids, user_id)`` — a
        (list key, payload) — then goes onto the broker to remove what long-term memory made of them, and
        the redrive re-sends a retraction still recorded after ``redrive_after_s``, so a rollback and its
        retraction cannot come apart. Nothing left to undo is a 409."""
        target = "undo" if to_version is None else to_version
        s = self._settings
        reply = self._run(tenant, session_id, "rollback", target, s.versions_kept, s.session_ttl_s, tenant, session_id)
        if reply[0] == "empty":
            raise Conflict(f"nothing to undo: the window of session {session_id!r} is empty (version {reply[1]})")
        self._raise_for(reply, session_id, to_version)
        self._retracted(reply[5], task)
        return RolledBack(
            session_id=session_id, version=int(reply[1]), restored=None if int(reply[2]) < 0 else int(reply[2]),
            removed=self._opened(tenant, reply[4], self._parse(session_id, reply[3])),
        )

    def drop(self, tenant: str, session_id: str) -> Retraction | None:
        """Delete the session's content in one step: every message it took is marked retracted (work still
        queued for it is dropped; its ids are not accepted again), records, full texts and snapshots go, the
        window is empty; the retraction of them all is recorded in the same step, for the caller to send
        (``send_retraction``; else the redrive does). None if it never took a message; 404 for no such session."""
        reply = self._run(tenant, session_id, "drop", self._settings.session_ttl_s, tenant, session_id)
        if reply[0] == "nosession":
            raise NotFound(f"no session {session_id!r}")
        return self._retracted(reply[3], None)

    def take_back(self, tenant: str, session_id: str, message_id: str) -> Retraction | None:
        """Take one message back, wherever it is: out of the window into a new version if the window holds it,
        marked retracted (its id is not accepted again; work still queued for it is dropped) and the retraction
        recorded in the same step, for the caller to send as ``drop``'s. None if it was taken back before; 404
        for a session or message that does not exist."""
        s = self._settings
        reply = self._run(tenant, session_id, "rollback", f"id:{message_id}", s.versions_kept, s.session_ttl_s,
                          tenant, session_id)
        if reply[0] == "missing":
            raise NotFound(f"session {session_id!r} has no message {message_id!r}")
        self._raise_for(reply, session_id, None)
        return self._retracted(reply[5], None)

    def _retracted(self, recorded: str, task: RetractTask | None) -> Retraction | None:
        """The retraction a step recorded ('' if it took nothing back), its ``task`` sent onto the broker."""
        if not recorded:
            return None
        retraction = Retraction.of(recorded)
        if task is not None:
            self.send_retraction(retraction, task)
        return retraction

    def send_retraction(self, retraction: Retraction, task: RetractTask) -> None:
        """``task`` onto the broker for a recorded retraction (if this never happens, the redrive sends it)."""
        self._dispatch.push([task(retraction.message_ids, retraction.user_id)])

    def retraction_done(self, retraction: Retraction) -> None:
        """``memory.retract`` removed what long-term memory made of these messages."""
        self._redis.zrem(keys.retracting(ids.shard(retraction.tenant, retraction.session_id)), retraction.member())

    def unfinished_retractions(self, older_than_s: float, limit: int) -> list[Retraction]:
        """Retractions recorded more than ``older_than_s`` ago and not done, oldest first (the redrive's)."""
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.zrangebyscore(keys.retracting(tag), "-inf", time.time() - older_than_s, start=0, num=limit,
                               withscores=True)
        found = sorted((at, member) for reply in pipe.execute() for member, at in scored(reply))
        return [Retraction.of(member) for _, member in found[:limit]]

    def retracted(self, tenant: str, session_id: str, message_id: str) -> bool:
        """Whether a rollback took this message back: its queued work is dropped (``memory.pipeline``)."""
        return self.retracted_each(tenant, [(session_id, message_id)])[0]

    def retracted_each(self, tenant: str, messages: Sequence[tuple[str, str]]) -> list[bool]:
        """``retracted`` for each (session id, message id), in one round trip: a rollback marks a message it
        takes back in the session's ids ("seq|hash|r", ``lua/sessions.lua``), in the step that takes it."""
        pipe = self._redis.pipeline(transaction=False)
        for session_id, message_id in messages:
            pipe.hget(keys.session(tenant, session_id).ids, message_id)
        return [isinstance(seen, str) and seen.endswith("|r") for seen in pipe.execute()]

    def seal_held(self, tenant: str, user_id: str, key: bytes) -> dict[str, int]:
        """Child mode for what the user's sessions already hold: every plaintext message record (of every
        kept snapshot), full text of a cut reply and queued job payload is sealed under ``key`` as ``append``
        seals a child's, and still reads back through ``read`` and ``get``. Call it once the user's policy says
        child: each session is flagged first ('child'), so from then on ``append`` seals by itself, then needs
        one read step ('held') and one compare-and-set step ('seal'), and nothing appended or rolled back in
        between is lost or brought back. Returns how many sessions, records, full texts and job payloads were
        sealed."""
        report = {"sessions": 0, "messages": 0, "full_texts": 0, "jobs": 0}
        for session_id in self.mark_child(tenant, user_id, True):
            sealed = self._seal_session(tenant, user_id, session_id, key)
            if sealed is not None:
                report["sessions"] += 1
                for name, n in zip(("messages", "full_texts", "jobs"), sealed, strict=True):
                    report[name] += n
        return report

    def mark_child(self, tenant: str, user_id: str, child: bool) -> list[str]:
        """The user's flag on each of their sessions (which the accept step checks): set after their policy
        changed, so a session started meanwhile, flagged from the old policy, is flagged again here. Returns
        the sessions flagged."""
        return [session_id for session_id in self.owned_sessions(tenant, user_id)
                if self._run(tenant, session_id, "child", user_id, "1" if child else "0")[0] == "ok"]

    def _seal_session(self, tenant: str, user_id: str, session_id: str, key: bytes) -> tuple[int, int, int] | None:
        reply = self._run(tenant, session_id, "held")
        if reply[0] != "ok" or reply[1] != user_id:  # expired, or another user's session
            return None
        records, fulls, digests = _pairs(reply[2]), _pairs(reply[3]), _pairs(reply[4])
        message_ids = list(digests)
        keyed = [(m, held, f"{seq}|{_keyed_digest(key, digest)}") for m, held in digests.items()
                 for seq, _, digest in [held.partition("|")] if not digest.startswith(KEYED)]

        def protect(text: str, message_id: str) -> str:
            return seal_text(key, text, f"{session_id}\x1f{message_id}")

        owners, changed = {}, []  # seq → message id; (seq, record, sealed record)
        for seq, raw in records.items():
            record = json.loads(raw)  # keys keep their order: the client timestamp stays first
            owners[seq] = record["m"]
            if not record["c"].startswith(SEALED_TEXT):
                record["c"] = protect(record["c"], record["m"])
                changed.append((seq, raw, json.dumps(record, ensure_ascii=False, separators=(",", ":"))))
        cut = [(seq, text, protect(text, owners[seq])) for seq, text in fulls.items()
               if seq in owners and not text.startswith(SEALED_TEXT)]
        job_keys = [keys.job(ids.job_id(tenant, session_id, m)) for m in message_ids]
        pipe = self._redis.pipeline(transaction=False)
        for job_key in job_keys:
            pipe.hget(job_key, "payload")
        payloads = pipe.execute() if job_keys else []
        queued, swaps = [], []
        for job_key, payload in zip(job_keys, payloads, strict=True):
            message = json.loads(payload) if payload else {}
            content = message.get("content", "")
            if content and not content.startswith(SEALED_TEXT):
                queued.append(job_key)
                swaps += [payload, json.dumps({**message, "content": protect(content, message["message_id"])},
                                              ensure_ascii=False, separators=(",", ":"))]
        if not (changed or cut or keyed or queued):
            return 0, 0, 0
        reply = self._run(tenant, session_id, "seal", user_id, len(changed), *(x for c in changed for x in c),
                          len(cut), *(x for c in cut for x in c), len(keyed), *(x for k in keyed for x in k), *swaps,
                          job_keys=queued)
        if reply[0] != "ok":
            return None
        return int(reply[1]), int(reply[2]), int(reply[3])

    def get(self, tenant: str, session_id: str, message_id: str) -> tuple[StoredMessage, str]:
        """One message with its full text (a cut assistant reply comes back whole)."""
        reply = self._run(tenant, session_id, "get", message_id)
        if reply[0] == "missing":
            raise NotFound(f"no message {message_id!r} in session {session_id!r}")
        if reply[0] == "gone":
            raise NotFound(f"message {message_id!r} has left working memory; search long-term memory instead")
        return self._got(tenant, session_id, message_id, reply)

    def full_texts(self, messages: Sequence[tuple[str, str, str]]) -> list[str | None]:
        """``get``'s full text for each (tenant, session id, message id), in one round trip; None for one no
        longer in working memory."""
        if not messages:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for tenant, session_id, message_id in messages:
            self._script(keys=self._keys(tenant, session_id), args=["get", message_id], client=pipe)
        with telemetry.observe_working("get"):
            replies = pipe.execute()
        return [self._got(*message, reply)[1] if reply[0] not in ("missing", "gone") else None
                for message, reply in zip(messages, replies, strict=True)]

    def _got(self, tenant: str, session_id: str, message_id: str, reply: list[Any]) -> tuple[StoredMessage, str]:
        [record] = self._opened(tenant, reply[3], self._parse(session_id, [reply[1]]))
        full = reply[2] or record.content
        return record, open_text(self._open_key(tenant, reply[3]), full, f"{session_id}\x1f{message_id}") or full

    def _raise_for(self, reply: list[Any], session_id: str, version: int | None) -> None:
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

    # --- the user-data protocol (``memory.userdata``): sessions, their messages, jobs and failure marks ---
    name = "sessions"

    def owned_sessions(self, tenant: str, user_id: str) -> list[str]:
        """The user's sessions, read from every shard's index (one round trip), that no other user owns."""
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.smembers(keys.user_sessions(tenant, user_id, tag))
        listed = sorted({s for found in pipe.execute() for s in decoded(found)})
        pipe = self._redis.pipeline(transaction=False)
        for session_id in listed:
            pipe.hget(keys.session(tenant, session_id).meta, "user")
        owners = pipe.execute() if listed else []
        return [s for s, owner in zip(listed, owners, strict=True) if owner in (None, user_id)]

    def count(self, tenant: str, user_id: str) -> int:
        return sum(self._redis.exists(keys.session(tenant, s).meta) for s in self.owned_sessions(tenant, user_id))

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        sessions = self.owned_sessions(tenant, user_id)
        messages = 0
        for session_id in sessions:
            k = keys.session(tenant, session_id)
            job_ids = [ids.job_id(tenant, session_id, m) for m in decoded(self._redis.hkeys(k.ids))]
            self._jobs.erase(job_ids)
            self._fair.forget(tenant, job_ids)
            self._redis.delete(*k.all(), keys.failed_session(tenant, session_id))
            messages += len(job_ids)
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.delete(keys.user_sessions(tenant, user_id, tag))
            pipe.zrange(keys.retracting(tag), 0, -1)
        replies = pipe.execute()
        pipe = self._redis.pipeline(transaction=False)
        for tag, members in zip(keys.SHARD_TAGS, replies[1::2], strict=True):
            for member in decoded(members):
                if (r := Retraction.of(member)).tenant == tenant and r.user_id == user_id:
                    pipe.zrem(keys.retracting(tag), member)  # its ids go with the user
        pipe.execute()
        return {self.name: len(sessions), "messages": messages, "jobs": messages}

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        """Each session's window at head (cut replies whole), plus messages only older kept versions hold."""
        sessions = []
        for session_id in self.owned_sessions(tenant, user_id):
            try:
                head = self.read(tenant, session_id)
            except NotFound:
                continue
            seen = {m.message_id for m in head.messages}
            older = []
            for version in range(head.head - 1, max(-1, head.head - self._settings.versions_kept), -1):
                try:
                    kept = self.read(tenant, session_id, version)
                except NotFound:
                    break
                older += [m for m in kept.messages if m.message_id not in seen]
                seen |= {m.message_id for m in kept.messages}
            sessions.append({"session_id": session_id, "version": head.head,
                             "messages": [self._exported(tenant, m) for m in head.messages],
                             "rolled_back_messages": [self._exported(tenant, m) for m in older]})
        return sessions

    def _exported(self, tenant: str, message: StoredMessage) -> dict[str, Any]:
        record = message.model_dump(mode="json", exclude={"seq"})
        if message.truncated:
            try:
                record["content"] = self.get(tenant, message.session_id, message.message_id)[1]
                record["truncated"] = False
            except NotFound:
                pass
        return record
