"""The episodic store port. Adapters fill in a few primitives over opaque, already-protected records;
sealing, keyed tokens (``memory.services.episodic``) and ranking (``memory.recall``) live once, outside them.

Two tiers in one store. Every event keeps its row — its sealed verbatim text, keyed tokens and vector —
until a named forgetting removes it (archive, delete-by-type, erasure), so nothing a user said becomes
unfindable through volume. The *event layer* is the rows with ``status = live``: at most ``cap`` per
user, where similar events are consolidated. The *deep tier* is every other row: ``merged`` (absorbed by
the live event ``canonical_id``) and ``evicted`` (let go of by the cap). Search covers both tiers unless
asked for fewer statuses.

Contract of ``add`` (one user's events, idempotent under redelivery):
- an event id seen before (in any status) changes nothing;
- else, a live event of the same user, type and role, recorded under the same purposes (``memory.purposes``:
  an event's purposes stay its messages'), whose vector has cosine ≥ ``merge_threshold`` absorbs it: count
  + its count, confidence ``1 - (1-a)(1-b)`` (at most 0.99), message ids united, latest ts; the new row
  is kept as ``merged`` with ``canonical_id`` naming the absorbing event;
- else it is inserted live; then, if the user has more than ``cap`` live events, until they have
  ``cap_floor(cap)`` (a tenth fewer, so the layer is not weighed again at each event; ``plan_overflow``):
  chit-chat (greetings, small talk, thanks) leaves the event layer first, lowest value first; then the
  most similar pair of live events of one type, role and purposes (cosine ≥ ``consolidate_threshold``)
  merges into the one worth more; then the lowest-value event leaves. Leaving means ``evicted``: kept, reported, and
  still searchable in the deep tier. Value orders by type rank first (``TYPE_RANK``: chit-chat < thanks <
  questions and moods < statements < facts about the user), then what the user said over the assistant's
  replies, then ``confidence × weight × noise × 0.5^(age_days/90) × (1 + log2(count))``: so the cap never
  keeps small talk or thanks over a statement of fact. Recall ranks both tiers alike.

Contract of ``retract`` (a message taken back, 撤回): the rows made from the messages go, and only those —
what other messages said stays, a message of the same id in another session of the user too
(``memory.provenance``). A live (or evicted) event that had absorbed others and was made from a
retracted message hands over to its newest remaining absorbed row, which takes its status, count and
message ids and becomes the one the others point at; an event that keeps its own row loses the retracted
messages from its message ids and one count per row removed. Either way ``ts`` becomes the latest
remaining row's ``said_at``; confidence stays (a merged confidence cannot be split back into its parts).
Running it again changes nothing. ``plan_retraction`` says what to do; every adapter applies it.

Contract of ``strip_content`` (a user who became a child, ``Privacy.bring_under_child_rules``): every row of the
user, in every status, is left as a child's event is stored — type only. Its payload becomes ``sealed(event_id)``
(the caller seals an empty summary, keywords and text), its index tokens go (keyword search finds it no more), its
vector becomes a zero row (nothing of a child's content is embedded) and its ``lang`` is ``lang``; everything else
stays (type, role, times, message ids, count, confidence, weight, noise, status, canonical id, text hash). Other
users' rows are not touched; running it again leaves the rows type only."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, Field, model_validator

from memory.models import EventBase, EventType, Role
from memory.provenance import Messages

LIVE, MERGED, EVICTED = "live", "merged", "evicted"
ALL_STATUSES = (LIVE, MERGED, EVICTED)  # every row a user has: erasure, export, archive and deletion see these
SEARCHABLE = ALL_STATUSES  # recall searches the event layer and the deep tier alike

CHIT_CHAT_RANK = 1
TYPE_RANK = {EventType.greeting: 0, EventType.small_talk: 0, EventType.feedback: 1, EventType.question: 2,
             EventType.emotion: 2, EventType.statement: 3, EventType.plan: 3, EventType.request: 3,
             EventType.operation_failure: 3}  # every other type (facts about the user): 4
FACT_RANK = 4
MAX_MERGED_CONFIDENCE = 0.99
UPDATABLE = frozenset({"weight", "noise", "status"})


class StoredEvent(EventBase):
    """An event as the store holds it: metadata, a sealed payload and keyed tokens — no plaintext."""

    lang: str
    noise: float = 1.0
    status: str = LIVE
    canonical_id: str | None = Field(None, description="For a merged row: the live event that absorbed it.")
    said_at: float = Field(0.0, description="When this row's own message was said (a live event's ``ts`` moves "
                                            "to its latest merged message); unset: ``ts``.")
    sealed: bytes = Field(repr=False)
    tokens: list[str] = Field(default_factory=list, repr=False)

    @model_validator(mode="after")
    def _said_when_made(self) -> StoredEvent:
        if not self.said_at:
            self.said_at = self.ts
        return self

    @property
    def message_id(self) -> str:
        """The message this row was made from (a live event's later message ids came from merges)."""
        return self.message_ids[0]


class Evicted(BaseModel):
    tenant: str
    user_id: str
    event_id: str
    event_type: EventType


class Consolidated(BaseModel):
    tenant: str
    user_id: str
    event_id: str
    into: str = Field(description="The live event that absorbed it.")


class AddReport(BaseModel):
    inserted: list[str] = Field(default_factory=list)
    merged: dict[str, str] = Field(default_factory=dict, description="event id → the event that absorbed it")
    known: list[str] = Field(default_factory=list, description="seen before: nothing changed")
    consolidated: list[Consolidated] = Field(default_factory=list, description="live events merged over the cap")
    evicted: list[Evicted] = Field(default_factory=list, description="out of the event layer, into the deep tier")


class RetractionPlan(BaseModel):
    removed: list[str] = Field(default_factory=list, description="rows made from a retracted message")
    updates: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="event id → fields to set (status, canonical_id, count, message_ids, ts)")


class EpisodicStore(Protocol):
    def add(self, events: Sequence[StoredEvent], vectors: np.ndarray, merge_threshold: float,
            cap: int, consolidate_threshold: float = 0.8) -> AddReport: ...

    def consolidate(self, tenant: str, user_id: str, cap: int, consolidate_threshold: float = 0.8) -> AddReport:
        """Hold one user to ``cap`` live events as ``add`` does (after the cap was lowered)."""
        ...

    def keyword_search(self, tenant: str, user_id: str, tokens: Sequence[str],
                       types: Collection[EventType] | None, k: int,
                       statuses: Collection[str] = SEARCHABLE,
                       purposes: Collection[str] | None = None,
                       among: Collection[str] | None = None) -> list[tuple[str, float]]:
        """(event_id, score) best first, of the rows recorded under one of ``purposes`` (tokens, see
        ``memory.purposes``; None: every row) and, when given, only of the rows ``among`` names (the
        statistics stay the user's). The score is BM25 (k1 1.2, b 0.75) with the user's own statistics
        (documents = distinct texts of the user), divided by the query's total term weight (the sum of the
        IDFs of its distinct tokens): 1.0 ≈ a text of average length holding every query token once."""
        ...

    def vector_search(self, tenant: str, user_id: str, vector: np.ndarray,
                      types: Collection[EventType] | None, k: int,
                      statuses: Collection[str] = SEARCHABLE,
                      purposes: Collection[str] | None = None,
                      among: Collection[str] | None = None) -> list[tuple[str, float]]:
        """(event_id, cosine similarity) best first, of the rows recorded under one of ``purposes`` and,
        when given, only of the rows ``among`` names."""
        ...

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        """The events that exist (in any status), in the order asked for."""
        ...

    def live_count(self, tenant: str, user_id: str) -> int: ...

    def dump(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             before_ts: float | None = None, statuses: Collection[str] = (LIVE,),
             limit: int = 10_000) -> list[tuple[StoredEvent, np.ndarray]]:
        """Events with their vectors (oldest first): for archiving, compaction, erasure and export."""
        ...

    def page(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             statuses: Collection[str] = ALL_STATUSES, message_ids: Collection[str] | None = None,
             session_id: str | None = None, before: tuple[float, str] | None = None,
             limit: int = 50) -> list[StoredEvent]:
        """A page of the user's rows, newest first (by ``ts``, then event id, both descending), after the
        cursor ``before`` (the (ts, event id) of the previous page's last row); when given, only rows whose
        message ids hold one of ``message_ids`` (an id names a message within its session: every session's
        rows of that id) and only rows made in session ``session_id``. For listing a user's memory; no
        vectors."""
        ...

    def delete(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> int:
        """Remove events, and the merged rows they absorbed, for good; returns how many rows went."""
        ...

    def retract(self, tenant: str, user_id: str, messages: Messages) -> int:
        """Remove the rows made from these messages, keeping what other messages said (see the contract
        above); returns how many rows went."""
        ...

    def strip_content(self, tenant: str, user_id: str, sealed: Callable[[str], bytes], lang: str) -> int:
        """Child mode for what is already stored (see the contract above); returns how many rows it rewrote."""
        ...

    def update(self, tenant: str, user_id: str, event_ids: Sequence[str], **fields: float | str) -> int:
        """Set ``weight`` (feedback), ``noise`` (noise down-weighting) or ``status`` on events."""
        ...

    def users(self, after: tuple[str, str] = ("", ""), limit: int = 1000) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have events, ordered, after ``after``: for batch maintenance."""
        ...

    def ping(self) -> None: ...


def merged_confidence(a: float, b: float) -> float:
    return min(MAX_MERGED_CONFIDENCE, 1 - (1 - a) * (1 - b))


class Standing(Protocol):
    """What the cap weighs of a live event (``plan_overflow``): a ``StoredEvent`` is one, and an adapter may
    read just these fields of its rows instead (a user at the cap has them all read for each batch)."""

    @property
    def event_id(self) -> str: ...
    @property
    def event_type(self) -> EventType: ...
    @property
    def role(self) -> Role: ...
    @property
    def purposes(self) -> Sequence[str]: ...
    @property
    def ts(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def weight(self) -> float: ...
    @property
    def noise(self) -> float: ...
    @property
    def count(self) -> int: ...


def eviction_value(event: Standing, now: float, count: int | None = None) -> tuple[int, bool, float]:
    """What keeping an event in the event layer is worth: its type's rank first, then whether the user said
    it (the layer is a memory of the user; the assistant's replies stay findable in the deep tier), then
    its strength."""
    age_days = max(0.0, now - event.ts) / 86400
    strength = (event.confidence * event.weight * event.noise * 0.5 ** (age_days / 90)
                * (1 + math.log2(max(1, event.count if count is None else count))))
    return TYPE_RANK.get(event.event_type, FACT_RANK), event.role == Role.user, strength


def cap_floor(cap: int) -> int:
    """Where an overflow takes a user's event layer: a tenth below the cap (180 of 200; the cap itself under
    10). A user at the cap then has their layer read and weighed once every ~20 events instead of at each one,
    which was most of what an event added at the cap cost (``python -m bench.episodic_add``)."""
    return cap - cap // 10


def overflow(live: int, cap: int) -> int:
    """How many events an overflow takes out of a layer of ``live`` live events: none at or below ``cap``,
    else down to ``cap_floor(cap)`` (``plan_overflow`` plans that many steps)."""
    return live - cap_floor(cap) if live > cap else 0


def plan_overflow(live: Sequence[Standing], vectors: np.ndarray, cap: int, threshold: float,
                  now: float) -> list[tuple[str, str | None]]:
    """How to bring ``live``, once over ``cap``, down to ``cap_floor(cap)``: ``(event_id, absorbed_into)``
    steps in order, where ``absorbed_into`` is None for an event that leaves the layer. Written once; every
    adapter applies it."""
    if not (over := overflow(len(live), cap)):
        return []
    counts = [e.count for e in live]
    values = [eviction_value(e, now) for e in live]
    alive = np.ones(len(live), dtype=bool)
    sims: np.ndarray | None = None  # computed when a step first looks for a pair (chit-chat goes without)
    steps: list[tuple[str, str | None]] = []
    for _ in range(over):
        candidates = np.flatnonzero(alive).tolist()
        chatter = [i for i in candidates if values[i][0] <= CHIT_CHAT_RANK]
        pair = None
        if not chatter:
            sims = _similarities(live, vectors, alive) if sims is None else sims
            pair = _most_similar_pair(sims, threshold)
        if pair is None:
            gone = min(chatter or candidates, key=lambda i: values[i])
            steps.append((live[gone].event_id, None))
        else:
            keep, gone = pair if values[pair[0]] >= values[pair[1]] else pair[::-1]
            steps.append((live[gone].event_id, live[keep].event_id))
            counts[keep] += counts[gone]
            values[keep] = eviction_value(live[keep], now, counts[keep])
        alive[gone] = False
        if sims is not None:  # a row that left pairs with none
            sims[gone, :] = sims[:, gone] = -np.inf
    return steps


def _similarities(live: Sequence[Standing], vectors: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Cosine of each pair of live events that may merge (one kind, both still in the layer); -inf for every
    other pair and an event with itself."""
    codes: dict[tuple[EventType, Role, tuple[str, ...]], int] = {}
    kinds = np.array([codes.setdefault(_kind(e), len(codes)) for e in live])
    matrix = np.asarray(vectors, dtype=np.float32)
    sims = matrix @ matrix.T
    sims[~(np.equal.outer(kinds, kinds) & alive[:, None] & alive[None, :])] = -np.inf
    np.fill_diagonal(sims, -np.inf)
    return sims


def _kind(event: Standing) -> tuple[EventType, Role, tuple[str, ...]]:
    """Events merge only with their kind: one type, one role, collected under the same purposes."""
    return event.event_type, event.role, tuple(sorted(set(event.purposes)))


def plan_retraction(rows: Sequence[StoredEvent], messages: Messages) -> RetractionPlan:
    """What retracting ``messages`` does to ``rows``: every row holding one of their ids in its message ids,
    and for each, its whole event (the row others point at and all that point at it). Written once. An id
    leaves a list of an event's when a message of that id was retracted and no row of the event kept was
    made from one (a list names ids only: the same id of another session keeps it)."""
    by_id = {r.event_id: r for r in rows}
    plan = RetractionPlan(removed=[r.event_id for r in rows if messages.holds(r.session_id, r.message_id)])
    removed = set(plan.removed)
    events: dict[str, list[StoredEvent]] = {}
    for row in rows:
        events.setdefault(row.canonical_id or row.event_id, []).append(row)
    still = {head_id: {r.message_id for r in members if r.event_id not in removed}
             for head_id, members in events.items()}

    def gone(message_id: str, row: StoredEvent) -> bool:
        return message_id not in still[row.canonical_id or row.event_id] and messages.holds(None, message_id)

    for head_id, members in events.items():
        head = by_id.get(head_id)
        left = [r for r in members if r.event_id not in removed]
        if head is None or not left or (len(left) == len(members) and not any(
                gone(m, r) for r in members for m in r.message_ids)):
            continue
        heir = head if head_id not in removed else max(left, key=lambda r: (r.said_at, r.event_id))
        kept = [m for m in head.message_ids if not gone(m, head) and m != heir.message_id]
        fields: dict[str, Any] = {"count": max(1, head.count - (len(members) - len(left))),
                                  "message_ids": [heir.message_id, *kept], "ts": max(r.said_at for r in left)}
        if heir is not head:
            fields.update(status=head.status, canonical_id=None)
            for row in left:
                if row is not heir:
                    plan.updates[row.event_id] = {"canonical_id": heir.event_id}
        plan.updates[heir.event_id] = fields
    for row in rows:  # a merged row that once absorbed others (over the cap) lists their ids too
        if row.event_id not in removed and any(gone(m, row) for m in row.message_ids):
            fields = plan.updates.setdefault(row.event_id, {})
            fields.setdefault("message_ids", [m for m in row.message_ids if not gone(m, row)])
    return plan


def _most_similar_pair(sims: np.ndarray, threshold: float) -> tuple[int, int] | None:
    best = int(np.argmax(sims))
    a, b = divmod(best, len(sims))
    return (a, b) if sims[a, b] >= threshold else None
