"""LangChain and LangGraph on Mneme (extra ``[langchain]``): a chat message history backed by a session's working
memory, a LangGraph store backed by recall and beliefs, and memory tools an agent can call.

- ``MnemeChatMessageHistory``: LangChain's ``BaseChatMessageHistory`` on one session — ``messages`` is its
  working window (long replies whole), ``add_messages`` appends (human → user, AI → assistant, system and tool
  messages kept as the session's context, never as memory), ``undo`` takes the latest message back (撤回),
  ``clear`` deletes the session and what long-term memory made of it.
- ``MnemeStore``: LangGraph's ``BaseStore`` on a user's long-term memory. A namespace is ``(user_id,
  "memories")`` — put a message (value ``{"content": …, "role"?: …, "session_id"?: …}``; the key is its
  message id), get it back, search it by meaning (recall), delete it (taken back everywhere) — or ``(user_id,
  "beliefs")`` — the user's beliefs, keyed ``"<relation>:<object>"``: put corrects one (source human), search
  lists them (the query's words first), delete removes one.
- ``memory_tools``: ``remember``, ``recall``, ``profile``, ``correct`` and ``forget`` as LangChain tools bound to
  one user, for an agent that manages its own memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from mneme_client._client import MnemeClient
from mneme_client.errors import NotFound
from mneme_client.models import BATCH_MAX, Belief, ListedEvent, Role, StoredMessage

SESSION = "langgraph-store"  # the session a store's memories are written to when the value names none
MADE_FROM_ROWS = 50  # rows listed by a message id: its own (an event each) and the events that absorbed them
_ROLES = {"human": Role.user, "ai": Role.assistant, "system": Role.system, "tool": Role.tool}


def _as_langchain(message: StoredMessage, content: str) -> BaseMessage:
    meta = {"id": message.message_id, "additional_kwargs": {"mneme_version": message.version}}
    if message.role == Role.user:
        return HumanMessage(content=content, **meta)
    if message.role == Role.assistant:
        return AIMessage(content=content, **meta)
    if message.role == Role.system:
        return SystemMessage(content=content, **meta)
    return ToolMessage(content=content, tool_call_id=message.message_id, **meta)


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


class MnemeChatMessageHistory(BaseChatMessageHistory):
    """One session of one user, in Mneme's working memory (see the module's text)."""

    def __init__(self, client: MnemeClient, user_id: str, session_id: str, device_id: str | None = None) -> None:
        self.client, self.user_id, self.session_id, self.device_id = client, user_id, session_id, device_id
        self.job_ids: list[str] = []  # of the messages added here: long-term memory is written in the background

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a property, as the interface allows
        try:
            window = self.client.messages(self.session_id).messages
        except NotFound:  # a session never written (or expired) has no messages yet
            return []
        return [_as_langchain(m, self.client.message(self.session_id, m.message_id).content if m.truncated
                              else m.content) for m in window]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """In one request per hundred messages (a turn's human and AI messages together)."""
        said = [{"user_id": self.user_id, "session_id": self.session_id, "message_id": message.id or uuid.uuid4().hex,
                 "role": _ROLES.get(message.type, Role.user), "content": _text(message), "device_id": self.device_id}
                for message in messages]
        for i in range(0, len(said), BATCH_MAX):
            self.job_ids += [a.job_id for a in self.client.remember_many(said[i:i + BATCH_MAX]).accepted]

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until long-term memory holds what was added here (extraction runs in Mneme's workers)."""
        self.client.wait(self.job_ids, timeout)

    def undo(self) -> list[BaseMessage]:
        """Take the latest message back (撤回上一条): out of the window and out of long-term memory."""
        rolled = self.client.rollback(self.session_id)
        return [_as_langchain(m, m.content) for m in rolled.removed]

    def clear(self) -> None:
        """Delete the session: its window, every kept version, and what long-term memory made of it."""
        self.client.delete_session(self.session_id)


def _event_item(namespace: tuple[str, ...], event: ListedEvent, score: float | None = None) -> SearchItem:
    when = datetime.fromtimestamp(event.ts, UTC)
    return SearchItem(namespace, event.message_ids[0], {
        "content": event.text or event.summary, "summary": event.summary, "event_type": str(event.event_type),
        "role": str(event.role), "session_id": event.session_id, "message_ids": event.message_ids},
        created_at=when, updated_at=when, score=score)


def _belief_item(namespace: tuple[str, ...], belief: Belief, score: float | None = None) -> SearchItem:
    when = datetime.fromtimestamp(belief.updated_at, UTC)
    return SearchItem(namespace, f"{belief.relation}:{belief.object}", {
        "relation": belief.relation, "object": belief.object, "confidence": belief.confidence,
        "source": str(belief.source), "why": belief.why, "message_ids": belief.message_ids, "rel_id": belief.rel_id},
        created_at=when, updated_at=when, score=score)


class MnemeStore(BaseStore):
    """A LangGraph store on Mneme's long-term memory (see the module's text). ``purpose``: what the agent's
    reads serve — only memories collected for it are found (None: any purpose the user granted)."""

    supports_ttl = False

    def __init__(self, client: MnemeClient, purpose: str | None = None) -> None:
        self.client, self.purpose = client, purpose

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)  # the sync client; an async agent runs it in a thread (LangGraph's own pattern)

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, SearchOp):
            return self._search(op.namespace_prefix, op.query, op.limit, op.offset)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    @staticmethod
    def _parts(namespace: tuple[str, ...]) -> tuple[str, str]:
        if len(namespace) != 2 or namespace[1] not in ("memories", "beliefs"):
            raise ValueError(f"a Mneme namespace is (user_id, 'memories') or (user_id, 'beliefs'), not {namespace}")
        return namespace[0], namespace[1]

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        user_id, kind = self._parts(namespace)
        if kind == "memories":
            made = self._made_from(user_id, key, include_text=True)
            return _event_item(namespace, made) if made else None
        beliefs = self.client.profile(user_id, purpose=self.purpose).beliefs
        return next((_belief_item(namespace, b) for b in beliefs if f"{b.relation}:{b.object}" == key), None)

    def _search(self, prefix: tuple[str, ...], query: str | None, limit: int, offset: int) -> list[SearchItem]:
        user_id, kind = self._parts(prefix)
        if kind == "memories":
            if query:
                recalled = self.client.recall(user_id=user_id, query=query, k=min(50, limit + offset),
                                              include_text=True, purpose=self.purpose)
                return [SearchItem(prefix, e.message_ids[0], {
                    "content": e.text or e.summary, "summary": e.summary, "event_type": str(e.event_type),
                    "role": str(e.role), "session_id": e.session_id, "message_ids": e.message_ids},
                    created_at=datetime.fromtimestamp(e.ts, UTC), updated_at=datetime.fromtimestamp(e.ts, UTC),
                    score=e.score) for e in recalled.events][offset:offset + limit]
            listed = self.client.events(user_id, limit=min(200, limit + offset), include_text=True).events
            return [_event_item(prefix, e) for e in listed][offset:offset + limit]
        beliefs = self.client.profile(user_id, purpose=self.purpose).beliefs
        words = set((query or "").lower().split())
        ranked = sorted(beliefs, key=lambda b: (-len(words & set(f"{b.relation} {b.object}".lower().split())),
                                                -b.confidence))
        return [_belief_item(prefix, b, score=b.confidence) for b in ranked][offset:offset + limit]

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None) -> None:
        user_id, kind = self._parts(namespace)
        if kind == "memories":
            if value is None:  # taken back: out of working memory and every long-term layer
                session = self._session_of(user_id, key)
                if session is not None:
                    self.client.delete_message(session, key)
                return
            self.client.remember(user_id=user_id, session_id=str(value.get("session_id") or SESSION), message_id=key,
                                 role=str(value.get("role") or Role.user), content=str(value["content"]))
            return
        relation, _, obj = key.partition(":")
        if value is None:
            held = self._get(namespace, key)
            if held is not None:
                self.client.delete_belief(user_id, str(held.value["rel_id"]))
            return
        self.client.correct(user_id, str(value.get("relation") or relation), str(value.get("object") or obj),
                            float(value.get("confidence", 0.95)))

    def _session_of(self, user_id: str, message_id: str) -> str | None:
        made = self._made_from(user_id, message_id)
        return made.session_id if made else None

    def _made_from(self, user_id: str, key: str, include_text: bool = False) -> ListedEvent | None:
        """The newest row made from the message ``key`` (a row's own message is the first of its ids). Listed
        by that id come also the events that absorbed it (the same thing said again, maybe in another session):
        they list it after their own, and are another message's memory."""
        found = self.client.events(user_id, message_ids=[key], include_text=include_text, limit=MADE_FROM_ROWS)
        return next((e for e in found.events if e.message_ids[0] == key), None)

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix"]
        users = {p[0] for p in prefixes if p and p[0] != "*"}
        found: list[tuple[str, ...]] = sorted((u, kind) for u in users for kind in ("beliefs", "memories"))
        if op.max_depth is not None:
            found = sorted({ns[:op.max_depth] for ns in found})
        return found[op.offset:op.offset + op.limit]


def memory_tools(client: MnemeClient, user_id: str, session_id: str, purpose: str | None = None) -> list[BaseTool]:
    """The memory tools of one user's conversation: remember, recall, profile, correct and forget."""

    @tool
    def remember(content: str) -> str:
        """Store something the user said (verbatim, in their language) in their long-term memory."""
        accepted = client.remember(user_id=user_id, session_id=session_id, message_id=uuid.uuid4().hex,
                                   content=content)
        return f"remembered (job {accepted.job_id})"

    @tool
    def recall(query: str) -> str:
        """Look up what the user said before, in their words; returns beliefs and past messages."""
        found = client.recall(user_id=user_id, query=query, session_id=session_id, purpose=purpose)
        facts = [f"- {f.relation}: {f.object} (confidence {f.confidence:.2f})" for f in found.facts]
        events = [f"- [{e.event_type}] {e.summary}" for e in found.events]
        if not facts and not events:
            return "nothing remembered about that" + (f" ({'; '.join(found.degraded.values())})" if found.degraded
                                                       else "")
        return "\n".join(["beliefs:", *facts, "past messages:", *events])

    @tool
    def profile() -> str:
        """Everything believed about the user, most confident first."""
        held = client.profile(user_id, purpose=purpose)
        if not held.known:
            return "nothing is known about this user: nothing is stored for them (a new user, or one erased)"
        return "\n".join(f"- {b.relation}: {b.object} ({b.confidence:.2f}, {b.source})" for b in held.beliefs) or (
            "no beliefs about this user yet")

    @tool
    def correct(relation: str, value: str) -> str:
        """Set a belief as the user states it (e.g. relation "age", value "17"); it wins over what was inferred."""
        belief = client.correct(user_id, relation, value)
        return f"now believed: {belief.relation} = {belief.object} ({belief.confidence:.2f})"

    @tool
    def forget(relation: str, value: str) -> str:
        """Forget one belief about the user (e.g. relation "likes", value "chemistry"), when they ask to."""
        held = [b for b in client.profile(user_id).beliefs if b.relation == relation and b.object == value]
        for belief in held:
            client.delete_belief(user_id, belief.rel_id)
        return f"forgot {relation} = {value}" if held else f"nothing believed about {relation} = {value}"

    return [remember, recall, profile, correct, forget]
