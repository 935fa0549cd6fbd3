"""The read path: working memory + episodic hybrid search + graph facts, in one bundle.

Events are ranked by reciprocal rank fusion of BM25 (keyed tokens) and vector similarity. Keyword
evidence from an event in another language than the query counts less (``cross_language_keyword_weight``):
across languages keyword matches are noise, while the multilingual embedding maps zh and en together.
The fused score is then weighted by recency and by the event's feedback weight. Every item says where
it came from (message ids) and why it was chosen (score parts).
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout

from pydantic import BaseModel, Field

from memory import telemetry
from memory.errors import MnemeError, NotFound
from memory.models import EventType, FactSource, Relation, Role
from memory.runtime import Runtime
from memory.text import language, tokenize
from memory.working import StoredMessage

RRF_K = 60  # reciprocal rank fusion constant (Cormack et al.)
# The long-term layers are asked at once, each on a thread of this pool, and waited for until the layer
# deadline: a store that hangs (a lock, a dead server) costs a recall that long, not the driver's timeout.
_LAYERS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="recall-layer")

#: Event types a query clearly asks for ("上次那个方案" → plan). Searched first; others fill up to k.
INFERRED_TYPES: tuple[tuple[re.Pattern[str], frozenset[EventType]], ...] = tuple(
    (re.compile(p, re.I), frozenset(t)) for p, t in [
        (r"方案|步骤|办法|怎么做的|the plan|the steps|solution|approach you", {EventType.plan}),
        (r"我(?:今年)?(?:几|多大)岁|我多大|how old am i|my age", {EventType.age_declaration}),
        (r"我叫什么|我的名字|what'?s my name|my name", {EventType.identity}),
        (r"几年级|年级|which grade|what grade|what year", {EventType.identity}),
        (r"(?:我|i).{0,6}(?:喜欢|爱|偏好|like|love|prefer)", {EventType.preference}),
        (r"(?:我|i).{0,6}(?:讨厌|不喜欢|hate|dislike|can'?t stand)", {EventType.dislike}),
        (r"搞混|混淆|分不清|不懂|没懂|confus|mix(?:ed)? up|don'?t understand", {EventType.concept_confusion}),
    ]
)


class EventHit(BaseModel):
    event_id: str
    event_type: EventType
    role: Role
    summary: str
    keywords: list[str]
    text: str | None = Field(None, description="The full message text, when asked for with include_text.")
    session_id: str
    ts: float
    confidence: float
    count: int
    message_ids: list[str]
    score: float
    why: dict[str, float] = Field(description="Score parts: keyword_rank, bm25, vector_rank, vector_sim, rrf, "
                                              "recency, weight (feedback), noise, type_match.")


class FactHit(BaseModel):
    rel_id: str
    subject: str
    relation: Relation
    object: str
    confidence: float = Field(description="Effective confidence: decayed to now.")
    source: FactSource
    message_ids: list[str]
    event_ids: list[str]
    devices: list[str]
    updated_at: float
    why: str = Field(description="Why recall chose it.")
    explanation: str = Field(description="How its confidence came to be.")


class RecallResult(BaseModel):
    user_id: str
    query: str
    inferred_types: list[EventType] = Field(default_factory=list)
    working: list[StoredMessage]
    events: list[EventHit]
    facts: list[FactHit]
    degraded: dict[str, str] = Field(default_factory=dict, description="Layers that could not answer, and why.")
    took_ms: float


def infer_types(query: str) -> frozenset[EventType]:
    found: set[EventType] = set()
    for pattern, types in INFERRED_TYPES:
        if pattern.search(query):
            found |= types
    return frozenset(found)


@telemetry.RECALL_SECONDS.time()
def recall(rt: Runtime, tenant: str, user_id: str, query: str, k: int = 5, session_id: str | None = None,
           event_types: Collection[EventType] | None = None, include_text: bool = False) -> RecallResult:
    started = time.perf_counter()
    degraded: dict[str, str] = {}
    working: list[StoredMessage] = []
    if session_id:
        try:
            working = rt.working.read(tenant, session_id).messages
        except NotFound:
            working = []
        except MnemeError as exc:
            degraded["working"] = exc.message
    inferred = frozenset() if event_types else infer_types(query)
    events: list[EventHit] = []
    facts: list[FactHit] = []
    if not rt.policies.get(tenant, user_id).keeps_long_term:
        degraded["long_term"] = "off: the user has not consented to long-term memory"
    else:
        rt.embedder  # noqa: B018 - loaded (once per process) before the layers' deadline starts
        answers = _within_deadline(rt.settings.recall_layer_timeout_s, degraded, {
            "episodic": lambda: search_events(rt, tenant, user_id, query, k, event_types, inferred, include_text),
            "graph": lambda: _facts(rt, tenant, user_id, query),
        })
        events, facts = answers.get("episodic", []), answers.get("graph", [])
    return RecallResult(
        user_id=user_id, query=query, inferred_types=sorted(inferred), working=working, events=events,
        facts=facts, degraded=degraded, took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _within_deadline(timeout_s: float, degraded: dict[str, str], layers: dict[str, Callable]) -> dict:
    """Each layer's answer; a layer that fails or does not answer within ``timeout_s`` goes to ``degraded``."""
    deadline = time.monotonic() + timeout_s
    futures = {name: _LAYERS.submit(contextvars.copy_context().run, ask) for name, ask in layers.items()}
    answers = {}
    for name, future in futures.items():
        try:
            answers[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Timeout:
            future.cancel()
            degraded[name] = f"{name} store unavailable: no answer within {timeout_s:g} s"
        except MnemeError as exc:
            degraded[name] = exc.message
    return answers


def search_events(rt: Runtime, tenant: str, user_id: str, query: str, k: int,
                  types: Collection[EventType] | None = None, inferred: frozenset[EventType] = frozenset(),
                  include_text: bool = False) -> list[EventHit]:
    vector = rt.embed_query(query)
    hits: list[EventHit] = []
    if inferred:  # what the query clearly asks for first, then the rest
        hits = _ranked(rt, tenant, user_id, query, vector, k, inferred, include_text, type_match=1.0)
    seen = {h.event_id for h in hits}
    if len(hits) < k:
        more = _ranked(rt, tenant, user_id, query, vector, k + len(hits), types, include_text, type_match=0.0)
        hits += [h for h in more if h.event_id not in seen][: k - len(hits)]
    return hits


def _ranked(rt: Runtime, tenant: str, user_id: str, query: str, vector, k: int,
            types: Collection[EventType] | None, include_text: bool, type_match: float) -> list[EventHit]:
    depth = max(k * 4, 30)
    s = rt.settings
    keyword = rt.episodic.keyword_search(tenant, user_id, query, types, depth)
    dense = rt.episodic.store.vector_search(tenant, user_id, vector, types, depth)
    parts: dict[str, dict[str, float]] = {}
    for rank, (event_id, bm25) in enumerate(keyword, 1):
        parts.setdefault(event_id, {}).update(keyword_rank=rank, bm25=round(bm25, 4))
    for rank, (event_id, sim) in enumerate(dense, 1):
        parts.setdefault(event_id, {}).update(vector_rank=rank, vector_sim=round(sim, 4))
    stored = {e.event_id: e for e in rt.episodic.store.get(tenant, user_id, list(parts))}
    query_lang, now = language(query), time.time()
    scored = []
    for event_id, p in parts.items():
        event = stored.get(event_id)
        if event is None:
            continue
        same_language = query_lang == event.lang or "mixed" in (query_lang, event.lang)
        keyword_weight = s.keyword_weight * (1.0 if same_language else s.cross_language_keyword_weight)
        rrf = keyword_weight / (RRF_K + p["keyword_rank"]) if "keyword_rank" in p else 0.0
        rrf += 1.0 / (RRF_K + p["vector_rank"]) if "vector_rank" in p else 0.0
        recency = 0.5 ** (max(0.0, now - event.ts) / 86400 / s.recency_half_life_days)
        score = rrf * (1 + s.recency_boost * recency) * event.weight * event.noise
        p.update(rrf=round(rrf, 6), recency=round(recency, 4), weight=event.weight, noise=event.noise,
                 type_match=type_match)
        scored.append((score, event))
    scored.sort(key=lambda se: se[0], reverse=True)
    hits = []
    for score, event in scored:
        shown = rt.episodic.reveal(event)
        if shown is None:  # its user's key was destroyed: nothing left to show
            continue
        if len(hits) == k:
            break
        hits.append(EventHit(
            **event.model_dump(include={"event_id", "event_type", "role", "session_id", "ts", "confidence",
                                        "count", "message_ids"}),
            summary=shown.summary, keywords=shown.keywords, text=shown.text if include_text else None,
            score=round(score, 6), why=parts[event.event_id],
        ))
    return hits


def _facts(rt: Runtime, tenant: str, user_id: str, query: str) -> list[FactHit]:
    """The user's active beliefs with decayed confidence; those the query mentions first."""
    wanted = set(tokenize(query))
    hits = []
    for belief in rt.beliefs.profile(tenant, user_id)[: rt.settings.recall_facts_limit]:
        overlap = len(wanted & set(tokenize(belief.object)))
        hits.append((overlap, FactHit(
            **belief.model_dump(include=set(FactHit.model_fields) - {"why", "explanation"}),
            why="mentioned in the query" if overlap else "part of the user's profile", explanation=belief.why,
        )))
    hits.sort(key=lambda h: (h[0] > 0, h[1].confidence), reverse=True)
    return [hit for _, hit in hits]
