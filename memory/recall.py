"""The read path: working memory + episodic search over both tiers + graph facts, in one bundle.

How an event's score is built (``README`` → "How recall ranks"):
1. The query is split into its main cue (the latest user turn of a dialogue-shaped query; a single turn
   is its own cue) and context (``memory.query``); a temporal phrase or a date gives a time window.
2. Candidates: the ``recall_depth`` best rows by keyword score and by vector similarity, over the event
   layer and the deep tier alike (every message a user said, until a named forgetting removes it). Each
   candidate is then scored on every signal (``EpisodicMemory.search``): a row one signal found is looked
   up in the other, never counted as 0 for missing its top ``recall_depth``. The depth does not depend on
   ``k``, so the first 10 of ``k=50`` are the ``k=10`` answer.
3. Each signal is a strength, not a rank: ``keyword`` is BM25 with the user's own statistics divided by
   the query's total term weight (1.0 ≈ every query term matched, capped there; ``memory.episodic``),
   ``vector_sim`` the cosine similarity. A rare name matched by the keyword side therefore counts in full
   and a long query's common words count little, in any language: an other-language memory that is the
   best semantic match keeps its full vector credit, and same-language memories get no free keyword
   credit for sharing common words. (Rank fusion gave every keyword hit nearly the same credit, and buried
   specifics; rescaling the similarity per query made it overrule the keyword side: both measured worse.)
4. ``relevance = vector_weight·similarity + keyword_weight·keyword`` (0–1), where ``similarity`` is the
   cosine above the embedder's chance level (``memory.embedding.chance_similarity``), so the fusion means
   the same whichever model a deployment chooses; the score is the relevance
   times the event's feedback weight and noise weight, ``1 + type_boost`` when its type is one the query
   asks for, ``1 + time_boost`` when it falls in the query's time window and ``1 + recency_boost·recency``.
   Both tiers rank on these merits alone: a boost for the live event layer sank what the cap had pushed
   into the deep tier and measured worse on every public dev set (``bench/recall_dev.py``).
5. One hit per message: the rows of one message (one per event type) collapse, and a message merged into
   another's event is still a hit of its own (``merged_into`` names the event). The best ``k`` are
   returned whenever the user has memories: nothing is dropped by a floor. Each hit carries its
   ``relevance`` and ``weak`` (neither signal reached ``recall_weak_similarity`` / ``recall_weak_keyword``:
   likely unrelated); a caller that wants only strong memories passes ``min_relevance``. The session's
   latest user message (the one being answered), and a message whose text is the query's, posted within
   the hour, are not recalled as the past.
Every hit says where it came from (message ids) and why it was chosen (``why``: the score parts).

Purpose-bound (``memory.purposes``): a recall names the purpose it serves, or none (any purpose the user
granted: everything, for a user who never withdrew one). Only memories collected under a grant of it that still
stands are candidates — filtered in the store, before ranking — and a purpose the user has not granted answers
nothing from long-term memory (``degraded``). Every hit lists the purposes it serves.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from memory import query as queries
from memory import telemetry
from memory.episodic import LIVE, StoredEvent
from memory.errors import MnemeError, NotFound
from memory.mneme import Mneme
from memory.models import EventType, FactSource, RelationName, Role
from memory.provenance import MessageRef
from memory.purposes import Grants
from memory.settings import Settings
from memory.state.working import StoredMessage
from memory.text import clean, language, sha256, tokenize

#: The long-term layers are asked at once, each on a thread of this pool, and waited for until the layer
#: deadline: a store that hangs (a lock, a dead server) costs a recall that long, not the driver's timeout.
_LAYERS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="recall-layer")
JUST_POSTED_S = 3600.0  # a message repeating the query, posted this recently, is the query itself
ALL_WEAK = "no memory matches the query strongly: every event recalled is flagged weak"
NONE_RELEVANT = "no memory reaches min_relevance"

#: Event types a query clearly asks for ("上次那个方案" → plan): they get ``type_boost``.
INFERRED_TYPES: tuple[tuple[re.Pattern[str], frozenset[EventType]], ...] = tuple(
    (re.compile(p, re.I), frozenset(t)) for p, t in [
        (r"方案|步骤|办法|怎么做的|the plan|the steps|solution|approach you", {EventType.plan}),
        (r"我(?:今年)?(?:几|多大)岁|我多大|how old am i|my age", {EventType.age_declaration}),
        (r"我叫什么|我的名字|what'?s my name|my name", {EventType.identity}),
        (r"几年级|年级|which grade|what grade|what year", {EventType.identity}),
        (r"(?:我|i).{0,4}(?:住在?哪|家在哪|来自哪)|where (?:do|did) i live|where i live|where am i (?:from|based)",
         {EventType.identity}),
        (r"我(?:是)?(?:做什么|干什么|干啥)(?:工作)?的|我的(?:工作|职业)是|what do i do for a living|"
         r"what'?s my (?:job|occupation)", {EventType.identity}),
        (r"(?:我|i).{0,6}(?:喜欢|爱|偏好|like|love|prefer)", {EventType.preference}),
        (r"(?:我|i).{0,6}(?:讨厌|不喜欢|hate|dislike|can'?t stand)", {EventType.dislike}),
        (r"搞混|混淆|分不清|不懂|没懂|confus|mix(?:ed)? up|don'?t understand", {EventType.concept_confusion}),
    ]
)


class EventHit(BaseModel):
    event_id: str = Field(description="This message's event (feedback targets it).")
    merged_into: str | None = Field(None, description="The live event this message was merged into, if any.")
    event_type: EventType
    tier: str = Field(description="'event': in the live event layer (or merged into one of its events); 'deep': "
                                  "let go of by the cap, kept verbatim in the deep tier.")
    role: Role
    summary: str
    keywords: list[str]
    text: str | None = Field(None, description="The full message text, when asked for with include_text.")
    session_id: str
    ts: float
    confidence: float
    count: int
    message_ids: list[str] = Field(description="The message this memory is.")
    purposes: list[str] = Field(description="The purposes this memory serves: collected under a grant that stands.")
    score: float = Field(description="What the hits are ordered by: relevance times the weights in ``why``.")
    relevance: float = Field(description="How well the message matches the query, 0-1 (vector_weight x similarity "
                                         "+ keyword_weight x keyword); what min_relevance thresholds.")
    weak: bool = Field(description="Neither the similarity nor the keyword score reached the weak line: likely "
                                   "unrelated to the query.")
    why: dict[str, float] = Field(description="Score parts: keyword, vector_sim (cosine), similarity (above the "
                                              "embedder's chance level), weight (feedback), noise, type_match, "
                                              "in_time_window, recency.")


class FactHit(BaseModel):
    rel_id: str
    subject: str
    relation: RelationName
    object: str
    confidence: float = Field(description="Effective confidence: decayed to now.")
    source: FactSource
    message_ids: list[str]
    event_ids: list[str]
    devices: list[str]
    purposes: list[str] = Field(description="The purposes this belief serves (those of its supporting claims).")
    updated_at: float
    why: str = Field(description="Why recall chose it.")
    explanation: str = Field(description="How its confidence came to be.")


class RecallResult(BaseModel):
    user_id: str
    query: str
    purpose: str | None = Field(None, description="The purpose the recall serves (none named: any purpose granted).")
    inferred_types: list[EventType] = Field(default_factory=list)
    working: list[StoredMessage]
    events: list[EventHit]
    facts: list[FactHit]
    degraded: dict[str, str] = Field(default_factory=dict, description="Layers that could not answer, and why.")
    notes: list[str] = Field(default_factory=list, description="What the caller should know, e.g. that nothing "
                                                               "in memory matched well enough.")
    took_ms: float


def infer_types(query: str) -> frozenset[EventType]:
    found: set[EventType] = set()
    for pattern, types in INFERRED_TYPES:
        if pattern.search(query):
            found |= types
    return frozenset(found)


@telemetry.RECALL_SECONDS.time()
def recall(mneme: Mneme, tenant: str, user_id: str, query: str, k: int = 5, session_id: str | None = None,
           event_types: Collection[EventType] | None = None, include_text: bool = False,
           now: float | None = None, purpose: str | None = None, min_relevance: float = 0.0) -> RecallResult:
    started, now = time.perf_counter(), time.time() if now is None else now
    degraded: dict[str, str] = {}
    notes: list[str] = []
    working: list[StoredMessage] = []
    if session_id:
        try:
            working = mneme.working.read(tenant, session_id).messages
        except NotFound:
            working = []
        except MnemeError as exc:
            degraded["working"] = exc.message
    cue = queries.parse(query, now)
    inferred = frozenset() if event_types else infer_types(cue.main)
    events: list[EventHit] = []
    facts: list[FactHit] = []
    policy = mneme.state.policies.get(tenant, user_id)
    if (off := policy.why_not_served(purpose)) is not None:
        degraded["long_term"] = off
    else:
        # the query is embedded before the layers' deadline starts: the deadline is the stores', and a
        # model still loading after a start delays the answer instead of emptying it
        search = Search(cue=cue, vector=query_vector(mneme, cue), k=k, types=event_types, inferred=inferred,
                        include_text=include_text, now=now, skip=_just_posted(working),
                        repeated=mneme.episodic.text_hash(tenant, user_id, sha256(clean(query))),
                        serving=tuple(policy.consent.serving(purpose)),
                        consent=policy.consent, min_relevance=min_relevance, chance=mneme.chance_similarity)
        answers = _within_deadline(mneme.settings.recall_layer_timeout_s, degraded, {
            "episodic": lambda: search_events(mneme, tenant, user_id, search),
            "graph": lambda: _facts(mneme, tenant, user_id, query, purpose),
        })
        events, facts = answers.get("episodic", []), answers.get("graph", [])
        if events and all(e.weak for e in events):
            notes.append(ALL_WEAK)
        elif "episodic" in answers and not events and min_relevance > 0:
            notes.append(NONE_RELEVANT)
    return RecallResult(
        user_id=user_id, query=query, purpose=purpose, inferred_types=sorted(inferred), working=working, events=events,
        facts=facts, degraded=degraded, notes=notes, took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _just_posted(working: list[StoredMessage]) -> frozenset[MessageRef]:
    """The session's latest user message: the question being answered now, never the past (the same id in
    another session is another message: ``memory.provenance``)."""
    latest = next((m for m in reversed(working) if m.role is Role.user), None)
    return frozenset([MessageRef(latest.session_id, latest.message_id)] if latest else [])


def _within_deadline(timeout_s: float, degraded: dict[str, str],
                     layers: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each layer's answer; a layer that fails or does not answer within ``timeout_s`` goes to ``degraded``."""
    deadline = time.monotonic() + timeout_s
    futures = {name: _LAYERS.submit(contextvars.copy_context().run, ask) for name, ask in layers.items()}
    answers: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            answers[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Timeout:
            future.cancel()
            degraded[name] = f"{name} store did not answer within {timeout_s:g} s (down, locked or overloaded)"
        except MnemeError as exc:
            degraded[name] = exc.message
    return answers


@dataclass(frozen=True)
class Search:
    cue: queries.Cue
    vector: np.ndarray  # the cue's (``query_vector``)
    k: int
    now: float
    types: Collection[EventType] | None = None
    inferred: frozenset[EventType] = frozenset()
    include_text: bool = False
    skip: frozenset[MessageRef] = frozenset()  # the session's message being answered now
    repeated: str = ""  # the hash of the query's text: the message that posted it is not the past
    serving: tuple[str, ...] | None = None  # only rows recorded under one of these grants (None: every row)
    consent: Grants = Grants()  # the user's: names the purposes each hit serves
    min_relevance: float = 0.0  # the caller's cut: hits less relevant are left out
    chance: float = 0.0  # the embedder's cosine between unrelated texts: similarity counts above it


class _Candidate:
    """One message's best evidence over its rows."""

    __slots__ = ("rows", "keyword", "sim")

    def __init__(self) -> None:
        self.rows: list[StoredEvent] = []
        self.keyword = 0.0
        self.sim = -1.0


Scored = tuple[float, MessageRef, _Candidate, dict[str, float]]  # score, message, its evidence, the score's parts


def search_events(mneme: Mneme, tenant: str, user_id: str, search: Search) -> list[EventHit]:
    s = mneme.settings
    found = mneme.episodic.search(tenant, user_id, search.cue.main, search.cue.context, search.vector,
                                  search.types, s.recall_depth, purposes=search.serving)
    keyword, sims = found.keyword, found.similarity
    query_lang = language(search.cue.main)
    candidates: dict[MessageRef, _Candidate] = {}  # a message's rows, by its session and id
    for row in found.rows:
        said = MessageRef(row.session_id, row.message_id)
        if said in search.skip or (row.text_hash == search.repeated and search.now - row.said_at < JUST_POSTED_S):
            continue
        c = candidates.setdefault(said, _Candidate())
        c.rows.append(row)
        same_language = query_lang == row.lang or "mixed" in (query_lang, row.lang)
        c.keyword = max(c.keyword, keyword.get(row.event_id, 0.0)
                        * (1.0 if same_language else s.cross_language_keyword_weight))
        c.sim = max(c.sim, sims.get(row.event_id, -1.0))
    scored = [(parts["score"], said, c, parts) for said, c in candidates.items()
              if (parts := _score(c, search, s))["relevance"] >= search.min_relevance]
    scored.sort(key=lambda x: (-x[0], x[1].message_id, x[1].session_id or ""))
    return _hits(mneme, scored, search)


def query_vector(mneme: Mneme, cue: queries.Cue) -> np.ndarray:
    """The cue's vector: the main cue's, with ``context_weight`` of the context's."""
    main = mneme.embed_query(cue.main)
    if not cue.context:
        return main
    weight = mneme.settings.context_weight
    blended = (1 - weight) * main + weight * mneme.embed_query(cue.context)
    return blended / max(float(np.linalg.norm(blended)), 1e-12)


def _score(c: _Candidate, search: Search, s: Settings) -> dict[str, float]:
    """The candidate's score and its parts (rounded where a hit shows them, ``_hits``)."""
    similarity = max(0.0, c.sim - search.chance) / (1 - search.chance)  # above chance, 0–1, whatever the model
    relevance = s.vector_weight * similarity + s.keyword_weight * min(1.0, c.keyword)
    row = c.rows[0] if len(c.rows) == 1 else None  # most messages made one event
    weight = row.weight if row else max(r.weight for r in c.rows)
    noise = row.noise if row else max(r.noise for r in c.rows)
    ts = row.said_at if row else max(r.said_at for r in c.rows)  # when the message itself was said
    type_match = float(bool(search.inferred) and any(r.event_type in search.inferred for r in c.rows))
    window = search.cue.window
    in_window = float(window is not None and window[0] <= ts <= window[1])
    recency = 0.5 ** (max(0.0, search.now - ts) / 86400 / s.recency_half_life_days)
    score = (relevance * weight * noise * (1 + s.type_boost * type_match) * (1 + s.time_boost * in_window)
             * (1 + s.recency_boost * recency))
    weak = float(similarity < s.recall_weak_similarity and c.keyword < s.recall_weak_keyword)
    return {"score": score, "relevance": relevance, "weak": weak, "keyword": c.keyword, "vector_sim": c.sim,
            "similarity": similarity, "weight": weight, "noise": noise, "type_match": type_match,
            "in_time_window": in_window, "recency": recency}


def _hits(mneme: Mneme, scored: list[Scored], search: Search) -> list[EventHit]:
    """The best ``k`` messages, one hit each (its rows of several event types collapse into one; a message
    merged into an event is still a hit of its own, with its own id, score and text)."""
    hits: list[EventHit] = []
    for score, (_, message_id), c, parts in scored:
        if len(hits) == search.k:
            break
        best = max(c.rows, key=lambda r: (r.status == LIVE, search.inferred and r.event_type in search.inferred,
                                          r.event_type is not EventType.question, r.count))
        shown = mneme.episodic.reveal(best)
        if shown is None:  # its user's key was destroyed: nothing left to show
            continue
        hits.append(EventHit(
            **best.model_dump(include={"event_id", "event_type", "role", "session_id", "confidence", "count"}),
            merged_into=best.canonical_id, ts=best.said_at,
            tier="event" if any(r.status == LIVE or r.canonical_id for r in c.rows) else "deep",
            message_ids=[message_id], summary=shown.summary, keywords=shown.keywords,
            text=shown.text if search.include_text else None, purposes=search.consent.purposes_of(best.purposes),
            score=round(score, 6), relevance=round(parts["relevance"], 4), weak=bool(parts["weak"]),
            why={k: round(v, 4) for k, v in parts.items() if k not in ("score", "relevance", "weak")},
        ))
    return hits


def _facts(mneme: Mneme, tenant: str, user_id: str, query: str, purpose: str | None) -> list[FactHit]:
    """The user's active beliefs that serve the purpose, with decayed confidence; those the query mentions
    first."""
    wanted = set(tokenize(query))
    hits = []
    for belief in mneme.semantic.profile(tenant, user_id, purpose=purpose)[: mneme.settings.recall_facts_limit]:
        overlap = len(wanted & set(tokenize(belief.object)))
        hits.append((overlap, FactHit(
            **belief.model_dump(include=set(FactHit.model_fields) - {"why", "explanation"}),
            why="mentioned in the query" if overlap else "part of the user's profile", explanation=belief.why,
        )))
    hits.sort(key=lambda h: (h[0] > 0, h[1].confidence), reverse=True)
    return [hit for _, hit in hits]
