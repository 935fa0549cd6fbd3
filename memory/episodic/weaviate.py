"""Episodic store on Weaviate (official client v4): ``weaviate://host:8080?grpc=50051`` or ``weaviates://…``.

Layout: one collection (``MnemeEvent``, or ``?collection=Name``) with multi-tenancy on; each Mneme
(tenant, user) pair is one Weaviate tenant named ``"u" + sha256([tenant, user])[:40]`` (the server allows
``[A-Za-z0-9_-]{1,64}``), so a user's events live in their own shard: isolation is physical, BM25
statistics are per user, and no query needs a user filter. Object UUIDs are ``generate_uuid5(event_id)``.
Vectors are self-provided (named vector ``embedding``, no vectorizer) in a ``flat`` index with cosine
distance: a user holds at most a few hundred live events, so exact brute force per shard is cheap and
ranks exactly like the SQLite adapter. Scores: vector similarity is ``1 - distance``; keyword scores are
Weaviate's BM25 (k1 1.2, b 0.75, like FTS5) over ``tokens``, a TEXT property with whitespace tokenization
and no stopwords, so each opaque keyed token is one term.

Tiers: an event merged into another is an object of its own (``status`` merged, ``canonical_id`` the
absorbing event), so its verbatim text stays searchable; "known" is one filter query on the ids. The
merged object is inserted before the absorbing event's count is raised: a crash between the two loses
one increment (a redelivery finds the id known), never counts twice.

Keyword scores: Weaviate's BM25 has per-user statistics already (one shard per user); the port wants it
divided by the query's total term weight, which this adapter estimates as the sum over the query's terms
of each term's best single-term BM25 score (one small query per term; a term in no memory adds the
largest of those, as an absent term's IDF is the highest).

Not guaranteed (unlike SQLite's one transaction per ``add``): an ``add`` is several requests, so a
failure midway leaves part of it applied (redelivery completes it: ids are deterministic and merges
recorded, but evictions made before the failure are not reported again); two processes adding for one
user at once may both insert near-duplicates or lose a merge increment (no compare-and-set).

Maintenance primitives (batch jobs: archiving, compaction, erasure, export, noise down-weighting):
- ``dump``: filtered fetches sorted by (``ts``, ``event_id``) on the server, with the ``embedding`` vector,
  ``_PAGE`` events each: the server refuses offset + limit beyond its ``QUERY_MAXIMUM_RESULTS`` (default
  10,000), so later pages resume at the last ``ts`` read (``ts ≥ last``, offset past those already read at
  it; a run of more than that maximum minus ``_PAGE`` events with one ``ts`` would be refused). A dump is
  not a snapshot: an event a concurrent merge moves across the cursor is read twice (returned once) or not
  at all.
- ``delete``: ``delete_many`` on the deterministic UUIDs (chunks of ``_CHUNK`` ids), then on the merged
  objects whose ``canonical_id`` names one of them. The user's Weaviate tenant
  stays, even when emptied: other processes remember it exists (and ``users`` skips empty tenants).
- ``retract``: the rows holding the messages (``message_ids`` filter), then their events' rows (by id
  and by ``canonical_id``), planned by ``plan_retraction``; hand-overs are PATCHed first (a cleared
  ``canonical_id`` is stored as ""), then the retracted rows deleted, so a failure midway leaves rows a
  retry removes, never an event pointing at a deleted one.
- ``update``: one object PATCH per event (``weight``, ``noise`` or ``status``, and ``updated_at``), each
  atomic; a call for several events is not, but repeating it is harmless.
- ``strip_content``: the user's tenant walked with the cursor iterator (with vectors, for their length), one
  PATCH per object (payload, empty ``tokens``, ``lang``, a zero ``embedding``); each atomic, the call not:
  a failure midway leaves rows a retry strips.
- ``users``: tenant names are one-way hashes, so the (tenant, user) pair is read back from the
  ``tenant``/``user_id`` properties every object carries: one request lists the tenants, then one
  one-object read per tenant this process has not mapped yet (pairs never change, so they are remembered;
  a tenant found empty is read again next call), then one per user on the page to confirm it still has
  events. A first call costs about one request per Weaviate tenant, later ones about ``limit`` plus the
  listing of every tenant: fine for batch maintenance, not for a request path (a read also re-activates a
  tenant an operator offloaded). A separate registry collection would make pages cheap, but it is a
  second write outside the event's object, which a crash or an erasure can leave disagreeing with the
  events; the tenants cannot.

``noise``, ``canonical_id`` and ``purposes`` were added later: ``from_url`` adds any property missing to a
collection created before it existed; objects written before read as ``noise`` 1.0, no ``canonical_id`` and
``purposes`` ``["*"]``. A search that names purposes filters on the property, which such objects lack: give
them ``purposes = ["*"]`` (one batch update per tenant) before serving purpose-bound recalls from them.

The API key, if the server wants one, is ``MNEME_WEAVIATE_API_KEY`` (``Settings.weaviate_api_key``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc
import httpx
import numpy as np
import weaviate
from weaviate.classes.config import Configure, DataType, Property, StopwordsPreset, Tokenization, VectorDistances
from weaviate.classes.data import DataObject
from weaviate.classes.init import AdditionalConfig, Auth, Timeout
from weaviate.classes.query import Filter, MetadataQuery, Sort
from weaviate.classes.tenants import Tenant
from weaviate.exceptions import (
    AuthenticationFailedError,
    InsufficientPermissionsError,
    UnexpectedStatusCodeError,
    WeaviateBaseError,
    WeaviateConnectionError,
    WeaviateGRPCUnavailableError,
    WeaviateInvalidInputError,
    WeaviateRetryError,
    WeaviateStartUpError,
    WeaviateTimeoutError,
)
from weaviate.util import generate_uuid5

from memory.episodic import (
    ALL_STATUSES,
    EVICTED,
    LIVE,
    MERGED,
    SEARCHABLE,
    UPDATABLE,
    AddReport,
    Consolidated,
    Evicted,
    StoredEvent,
    merged_confidence,
    plan_overflow,
    plan_retraction,
)
from memory.errors import ConfigurationError, TransientError
from memory.models import EventType
from memory.provenance import Messages
from memory.purposes import ANY
from memory.settings import Settings

DEFAULT_COLLECTION = "MnemeEvent"
VECTOR = "embedding"
TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
COLLECTION_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]{0,127}$")

_FIELDS = ("event_id", "tenant", "user_id", "session_id", "ts", "event_type", "role", "lang", "text_hash",
           "message_ids", "confidence", "count", "weight", "noise", "status", "canonical_id", "said_at", "sealed",
           "tokens", "purposes")
_READ = list(_FIELDS)  # BLOB properties are only returned when named
_PROPERTIES = [
    *(Property(name=n, data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False)
      for n in ("event_id", "tenant", "user_id", "session_id", "event_type", "role", "lang", "text_hash", "status",
                "canonical_id")),
    *(Property(name=n, data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD, index_searchable=False)
      for n in ("message_ids", "purposes")),
    *(Property(name=n, data_type=DataType.NUMBER) for n in ("ts", "said_at", "confidence", "weight", "noise",
                                                            "updated_at")),
    Property(name="count", data_type=DataType.INT),
    Property(name="sealed", data_type=DataType.BLOB),
    Property(name="tokens", data_type=DataType.TEXT, tokenization=Tokenization.WHITESPACE, index_filterable=False),
]
_TRANSIENT_HTTP = {429, 502, 503, 504}
_TRANSIENT_GRPC = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
_LIVE = Filter.by_property("status").equal(LIVE)
_CHUNK = 1000  # ids per filter in delete/update: well under the server's QUERY_MAXIMUM_RESULTS
_PAGE = 1000  # events (with their vectors and payloads) per fetch in dump


def tenant_name(tenant: str, user_id: str) -> str:
    """The Weaviate tenant holding one Mneme user: deterministic, pattern-safe, unambiguous."""
    return "u" + hashlib.sha256(json.dumps([tenant, user_id]).encode()).hexdigest()[:40]


def object_id(event_id: str) -> str:
    return generate_uuid5(event_id)


@dataclass(frozen=True)
class Target:
    http_host: str
    http_port: int
    secure: bool
    grpc_host: str
    grpc_port: int
    collection: str = DEFAULT_COLLECTION


def parse_url(url: str) -> Target:
    """``weaviate[s]://host[:port][?grpc=PORT&grpc_host=HOST&collection=Name]``; ports default to
    8080/50051 (``weaviate``) or 443/443 (``weaviates``, TLS on both)."""
    parts = urlsplit(url)
    if parts.scheme not in ("weaviate", "weaviates") or not parts.hostname:
        raise ConfigurationError(f"expected weaviate://host:port or weaviates://host, got {url!r}")
    secure = parts.scheme == "weaviates"
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"grpc", "grpc_host", "collection"}
    collection = query.get("collection", DEFAULT_COLLECTION)
    if unknown or not COLLECTION_NAME.match(collection):
        raise ConfigurationError(f"bad weaviate URL {url!r}: use ?grpc=PORT&grpc_host=HOST&collection=Capitalised")
    try:
        http_port = parts.port or (443 if secure else 8080)
        grpc_port = int(query.get("grpc", 443 if secure else 50051))
    except ValueError as exc:
        raise ConfigurationError(f"bad port in weaviate URL {url!r}") from exc
    if not 0 < grpc_port < 65536:
        raise ConfigurationError(f"bad grpc port in weaviate URL {url!r}")
    return Target(parts.hostname, http_port, secure, query.get("grpc_host", parts.hostname), grpc_port, collection)


def _is_transient(exc: BaseException | None) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, WeaviateConnectionError | WeaviateTimeoutError | WeaviateRetryError | WeaviateStartUpError
                      | WeaviateGRPCUnavailableError | httpx.TransportError | TimeoutError | ConnectionError):
            return True
        if isinstance(exc, UnexpectedStatusCodeError) and exc.status_code in _TRANSIENT_HTTP:
            return True
        if isinstance(exc, grpc.RpcError) and getattr(exc, "code", lambda: None)() in _TRANSIENT_GRPC:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def _boundary(what: str) -> Iterator[None]:
    """Weaviate errors become Mneme's: unreachable or busy → TransientError (tasks retry), refused
    credentials → ConfigurationError; anything else is a bug or a bad schema and propagates."""
    try:
        yield
    except (WeaviateBaseError, httpx.HTTPError, grpc.RpcError, OSError) as exc:
        if isinstance(exc, AuthenticationFailedError | InsufficientPermissionsError):
            raise ConfigurationError(f"weaviate refused {what}: check MNEME_WEAVIATE_API_KEY: {exc}") from exc
        if _is_transient(exc):
            raise TransientError(f"weaviate unavailable during {what}: {exc}") from exc
        raise


@dataclass
class _UserAdd:
    """One user's share of an ``add``: what the server already knows, and what this call will write."""

    handle: Any
    seen: set[str]
    pending: dict[str, tuple[dict[str, Any], np.ndarray]] = field(default_factory=dict)  # id → (properties, vector)
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)  # stored event id → its properties, merged so far
    changed: set[str] = field(default_factory=set)  # stored event ids that absorbed an event in this call


class WeaviateEpisodicStore:
    def __init__(self, client: weaviate.WeaviateClient, collection: str = DEFAULT_COLLECTION) -> None:
        self.client = client
        self.collection_name = collection
        self._collection = client.collections.use(collection)
        # Weaviate tenants known to exist → the (tenant, user) pair each holds; tenants are never removed
        self._tenants: dict[str, tuple[str, str]] = {}

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> WeaviateEpisodicStore:
        target = parse_url(url)
        api_key = settings.weaviate_api_key or None
        with _boundary("connect"):
            client = weaviate.connect_to_custom(
                http_host=target.http_host, http_port=target.http_port, http_secure=target.secure,
                grpc_host=target.grpc_host, grpc_port=target.grpc_port, grpc_secure=target.secure,
                auth_credentials=Auth.api_key(api_key) if api_key else None,
                additional_config=AdditionalConfig(timeout=Timeout(init=3, query=20, insert=60)),
            )
        try:
            with _boundary("schema setup"):
                _ensure_collection(client, target.collection)
        except BaseException:
            client.close()
            raise
        return cls(client, target.collection)

    def close(self) -> None:
        self.client.close()

    # --- writes -----------------------------------------------------------------------------

    def add(self, events: Sequence[StoredEvent], vectors: np.ndarray, merge_threshold: float,
            cap: int, consolidate_threshold: float = 0.8) -> AddReport:
        report = AddReport()
        with _boundary("add"):
            users = self._start(events)
            for event, vector in zip(events, vectors, strict=True):
                self._add_one(users[(event.tenant, event.user_id)], event, np.asarray(vector, dtype=np.float32),
                              merge_threshold, report)
            for batch in users.values():
                self._write(batch)
            for (tenant, user_id), batch in users.items():
                self._enforce_cap(batch.handle, tenant, user_id, cap, consolidate_threshold, report)
        return report

    def consolidate(self, tenant: str, user_id: str, cap: int, consolidate_threshold: float = 0.8) -> AddReport:
        report = AddReport()
        with _boundary("consolidate"):
            handle = self._handle(tenant, user_id)
            if handle is not None:
                self._enforce_cap(handle, tenant, user_id, cap, consolidate_threshold, report)
        return report

    def _start(self, events: Sequence[StoredEvent]) -> dict[tuple[str, str], _UserAdd]:
        """Per user (in order of first appearance): make sure the tenant exists and look up, in one
        query, which of the ids are stored already (live, merged or evicted)."""
        wanted: dict[tuple[str, str], list[str]] = {}
        for e in events:
            wanted.setdefault((e.tenant, e.user_id), []).append(e.event_id)
        users = {}
        for (tenant, user_id), event_ids in wanted.items():
            handle = self._handle(tenant, user_id, create=True)
            ids = list(dict.fromkeys(event_ids))
            found = handle.query.fetch_objects(filters=Filter.by_id().contains_any([object_id(i) for i in ids]),
                                               limit=len(ids), return_properties=["event_id"]).objects
            stored = {o.properties["event_id"] for o in found}
            users[(tenant, user_id)] = _UserAdd(handle, stored & set(ids))
        return users

    def _add_one(self, batch: _UserAdd, event: StoredEvent, vector: np.ndarray, threshold: float,
                 report: AddReport) -> None:
        if event.event_id in batch.seen:
            report.known.append(event.event_id)
            return
        batch.seen.add(event.event_id)
        target = self._merge_target(batch, event, vector, threshold)
        if target is None:
            batch.pending[event.event_id] = (_properties(event.model_copy(update={"status": LIVE})), vector)
            report.inserted.append(event.event_id)
            return
        props = target
        merged = event.model_copy(update={"status": MERGED, "canonical_id": props["event_id"]})
        batch.pending[event.event_id] = (_properties(merged), vector)
        _absorb(props, event.count, event.confidence, event.message_ids, event.ts)
        if props["event_id"] not in batch.pending:
            batch.changed.add(props["event_id"])
        report.merged[event.event_id] = props["event_id"]

    def _merge_target(self, batch: _UserAdd, event: StoredEvent, vector: np.ndarray,
                      threshold: float) -> dict[str, Any] | None:
        """The properties (to update in place) of the most similar live event of the same type, role and
        purposes, if its cosine reaches ``threshold``: stored ones by an exact near_vector query, ones
        pending in this call by numpy."""
        best: dict[str, Any] | None = None
        best_sim = -np.inf
        recorded = sorted(set(event.purposes))
        hits = batch.handle.query.near_vector(
            vector.tolist(), target_vector=VECTOR, limit=1, return_metadata=MetadataQuery(distance=True),
            return_properties=["event_id", "count", "confidence", "message_ids", "ts", "purposes"],
            filters=_LIVE & Filter.by_property("event_type").equal(event.event_type.value)
            & Filter.by_property("role").equal(event.role.value)
            & Filter.by_property("purposes").contains_all(recorded),
        ).objects
        hits = [h for h in hits if sorted(h.properties.get("purposes") or [ANY]) == recorded]  # all, and no more
        if hits:
            best_sim = 1.0 - hits[0].metadata.distance
            stored_id = hits[0].properties["event_id"]
            best = batch.stored.setdefault(stored_id, dict(hits[0].properties))
        for props, other in batch.pending.values():
            if (props["status"] == LIVE and props["event_type"] == event.event_type.value
                    and props["role"] == event.role.value and props["purposes"] == recorded):
                sim = float(np.dot(other, vector) / (np.linalg.norm(other) * np.linalg.norm(vector)))
                if sim > best_sim:
                    best, best_sim = props, sim
        return best if best is not None and best_sim >= threshold else None

    def _write(self, batch: _UserAdd) -> None:
        """New objects first (merged ones included), then the counts of the stored events that absorbed them."""
        now = time.time()
        if batch.pending:
            result = batch.handle.data.insert_many([
                DataObject(properties={**props, "updated_at": now}, uuid=object_id(event_id),
                           vector={VECTOR: vector.tolist()})
                for event_id, (props, vector) in batch.pending.items()
            ])
            if result.has_errors:
                first = next(iter(result.errors.values()))
                raise TransientError(f"weaviate rejected {len(result.errors)} events: {first.message}")
        for event_id in batch.changed:
            merged = {k: batch.stored[event_id][k] for k in _ABSORBED}
            batch.handle.data.update(uuid=object_id(event_id), properties={**merged, "updated_at": now})

    def _enforce_cap(self, handle: Any, tenant: str, user_id: str, cap: int, threshold: float,
                     report: AddReport) -> None:
        live = handle.aggregate.over_all(filters=_LIVE, total_count=True).total_count or 0
        if live <= cap:
            return
        rows = handle.query.fetch_objects(filters=_LIVE, limit=live, return_properties=_READ,
                                          include_vector=[VECTOR]).objects
        props = {o.properties["event_id"]: dict(o.properties) for o in rows}
        events = [_event(o.properties) for o in rows]
        vectors = np.asarray([o.vector[VECTOR] for o in rows], dtype=np.float32)
        now = time.time()
        for event_id, into in plan_overflow(events, vectors, cap, threshold, now):
            gone = props[event_id]
            if into is None:
                handle.data.update(uuid=object_id(event_id), properties={"status": EVICTED, "updated_at": now})
                report.evicted.append(Evicted(tenant=tenant, user_id=user_id, event_id=event_id,
                                              event_type=EventType(gone["event_type"])))
                continue
            target = props[into]
            _absorb(target, int(gone["count"]), gone["confidence"], list(gone.get("message_ids") or []), gone["ts"])
            children = handle.query.fetch_objects(filters=Filter.by_property("canonical_id").equal(event_id),
                                                  limit=10_000, return_properties=["event_id"]).objects
            handle.data.update(uuid=object_id(event_id),
                               properties={"status": MERGED, "canonical_id": into, "updated_at": now})
            for child in children:
                handle.data.update(uuid=object_id(child.properties["event_id"]), properties={"canonical_id": into})
            handle.data.update(uuid=object_id(into),
                               properties={**{k: target[k] for k in _ABSORBED}, "updated_at": now})
            report.consolidated.append(Consolidated(tenant=tenant, user_id=user_id, event_id=event_id, into=into))

    # --- reads ------------------------------------------------------------------------------

    def keyword_search(self, tenant: str, user_id: str, tokens: Sequence[str], types: Collection[EventType] | None,
                       k: int, statuses: Collection[str] = SEARCHABLE,
                       purposes: Collection[str] | None = None,
                       among: Collection[str] | None = None) -> list[tuple[str, float]]:
        terms = sorted(set(tokens))
        with _boundary("keyword search"):
            handle = self._handle(tenant, user_id)
            if (handle is None or not terms or k <= 0 or not statuses or (purposes is not None and not purposes)
                    or (among is not None and not among)):
                return []
            where = _where(types, statuses, purposes)
            hits = handle.query.bm25(" ".join(terms), query_properties=["tokens"], filters=_only(where, among), limit=k,
                                     return_metadata=MetadataQuery(score=True), return_properties=["event_id"])
            if not hits.objects:
                return []
            best = [_best_bm25(handle, term, where) for term in terms]
            total = sum(best) + (len(best) - sum(1 for b in best if b)) * max(best)
        return [(o.properties["event_id"], float(o.metadata.score) / (total or 1.0)) for o in hits.objects]

    def vector_search(self, tenant: str, user_id: str, vector: np.ndarray, types: Collection[EventType] | None,
                      k: int, statuses: Collection[str] = SEARCHABLE,
                      purposes: Collection[str] | None = None,
                      among: Collection[str] | None = None) -> list[tuple[str, float]]:
        with _boundary("vector search"):
            handle = self._handle(tenant, user_id)
            if (handle is None or k <= 0 or not statuses or (purposes is not None and not purposes)
                    or (among is not None and not among)):
                return []
            hits = handle.query.near_vector(
                np.asarray(vector, dtype=np.float32).tolist(), target_vector=VECTOR,
                filters=_only(_where(types, statuses, purposes), among), limit=k,
                return_metadata=MetadataQuery(distance=True), return_properties=["event_id"],
            )
        return [(o.properties["event_id"], 1.0 - float(o.metadata.distance)) for o in hits.objects]

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        with _boundary("get"):
            handle = self._handle(tenant, user_id)
            if handle is None or not event_ids:
                return []
            uuids = list(dict.fromkeys(object_id(i) for i in event_ids))
            rows = handle.query.fetch_objects(filters=Filter.by_id().contains_any(uuids), limit=len(uuids),
                                              return_properties=_READ).objects
        found = {o.properties["event_id"]: _event(o.properties) for o in rows}
        return [found[i] for i in event_ids if i in found]

    def live_count(self, tenant: str, user_id: str) -> int:
        with _boundary("live count"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return 0
            return handle.aggregate.over_all(filters=_LIVE, total_count=True).total_count or 0

    # --- maintenance --------------------------------------------------------------------------

    def dump(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             before_ts: float | None = None, statuses: Collection[str] = (LIVE,),
             limit: int = 10_000) -> list[tuple[StoredEvent, np.ndarray]]:
        if not statuses or limit <= 0:
            return []
        where = Filter.by_property("status").contains_any(sorted(statuses))
        if types:
            where &= Filter.by_property("event_type").contains_any(sorted(EventType(t).value for t in types))
        if before_ts is not None:
            where &= Filter.by_property("ts").less_than(float(before_ts))
        found: dict[str, tuple[StoredEvent, np.ndarray]] = {}
        resume_ts, tied = None, 0  # next page: ts ≥ resume_ts, skipping the `tied` events at it already read
        with _boundary("dump"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return []
            while len(found) < limit:
                page = min(_PAGE, limit - len(found))
                since = None if resume_ts is None else Filter.by_property("ts").greater_or_equal(resume_ts)
                rows = handle.query.fetch_objects(
                    filters=where if since is None else where & since,
                    sort=Sort.by_property("ts").by_property("event_id"), offset=tied or None, limit=page,
                    include_vector=[VECTOR], return_properties=_READ,
                ).objects
                for o in rows:  # an event whose ts a concurrent merge moved past the cursor is not repeated
                    event = _event(o.properties)
                    found.setdefault(event.event_id, (event, np.asarray(o.vector[VECTOR], dtype=np.float32)))
                if len(rows) < page:
                    break
                last = float(rows[-1].properties["ts"])
                tied = (tied if last == resume_ts else 0) + sum(float(o.properties["ts"]) == last for o in rows)
                resume_ts = last
        return list(found.values())[:limit]

    def page(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             statuses: Collection[str] = ALL_STATUSES, message_ids: Collection[str] | None = None,
             session_id: str | None = None, before: tuple[float, str] | None = None,
             limit: int = 50) -> list[StoredEvent]:
        if not statuses or limit <= 0 or (message_ids is not None and not message_ids):
            return []
        where = _where(types, statuses)
        if session_id is not None:
            where &= Filter.by_property("session_id").equal(session_id)
        if message_ids is not None:
            where &= Filter.by_property("message_ids").contains_any(sorted(set(message_ids)))
        if before is not None:
            where &= Filter.by_property("ts").less_or_equal(float(before[0]))
        with _boundary("page"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return []
            tied = 0 if before is None else handle.aggregate.over_all(  # rows at the cursor's ts, already read
                filters=where & Filter.by_property("ts").equal(float(before[0]))
                & Filter.by_property("event_id").greater_or_equal(before[1]), total_count=True).total_count or 0
            rows = handle.query.fetch_objects(
                filters=where, sort=Sort.by_property("ts", ascending=False).by_property("event_id", ascending=False),
                offset=tied or None, limit=limit, return_properties=_READ).objects
        return [_event(o.properties) for o in rows]

    def delete(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> int:
        if not event_ids:
            return 0
        deleted = 0
        with _boundary("delete"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return 0
            for chunk in _chunks(list(dict.fromkeys(event_ids))):
                for where in (Filter.by_property("canonical_id").contains_any(chunk),
                              Filter.by_id().contains_any([object_id(i) for i in chunk])):
                    result = handle.data.delete_many(where=where)
                    if result.failed:  # what went is gone; a retry deletes the rest
                        raise TransientError(f"weaviate failed to delete {result.failed} events")
                    deleted += result.successful
        return deleted

    def retract(self, tenant: str, user_id: str, messages: Messages) -> int:
        if not messages:
            return 0
        with _boundary("retract"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return 0
            holding = Filter.by_property("message_ids").contains_any(messages.ids())
            touched = self._fetch_all(handle, holding)
            heads = sorted({o.properties["canonical_id"] or o.properties["event_id"] for o in touched})
            if not heads:
                return 0
            rows = {o.properties["event_id"]: o for o in touched}
            for chunk in _chunks(heads):
                for where in (Filter.by_id().contains_any([object_id(i) for i in chunk]),
                              Filter.by_property("canonical_id").contains_any(chunk)):
                    rows.update((o.properties["event_id"], o) for o in self._fetch_all(handle, where))
            plan = plan_retraction([_event(o.properties) for o in rows.values()], messages)
            # hand-overs first: a failure midway leaves rows of the retracted message, which a retry removes
            now = time.time()
            for event_id, fields in plan.updates.items():
                props = {k: "" if k == "canonical_id" and v is None else v for k, v in fields.items()}
                handle.data.update(uuid=object_id(event_id), properties={**props, "updated_at": now})
            for chunk in _chunks(plan.removed):
                result = handle.data.delete_many(where=Filter.by_id().contains_any([object_id(i) for i in chunk]))
                if result.failed:
                    raise TransientError(f"weaviate failed to delete {result.failed} events")
        return len(plan.removed)

    def strip_content(self, tenant: str, user_id: str, sealed: Callable[[str], bytes], lang: str) -> int:
        stripped = 0
        with _boundary("strip content"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return 0
            now = time.time()
            # the cursor walks object UUIDs, which an update does not change: each object is seen once
            for o in handle.iterator(include_vector=True, return_properties=["event_id"]):
                event_id = o.properties["event_id"]
                handle.data.update(uuid=object_id(event_id), vector={VECTOR: [0.0] * len(o.vector[VECTOR])},
                                   properties={"sealed": base64.b64encode(sealed(event_id)).decode(), "tokens": "",
                                               "lang": lang, "updated_at": now})
                stripped += 1
        return stripped

    @staticmethod
    def _fetch_all(handle: Any, where: Any) -> list[Any]:
        objects: list[Any] = handle.query.fetch_objects(filters=where, limit=10_000, return_properties=_READ).objects
        return objects

    def update(self, tenant: str, user_id: str, event_ids: Sequence[str], **fields: float | str) -> int:
        unknown = set(fields) - UPDATABLE
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}; updatable: {sorted(UPDATABLE)}")
        if not event_ids or not fields:
            return 0
        props = {k: v if k == "status" else float(v) for k, v in fields.items()}
        updated = 0
        with _boundary("update"):
            handle = self._handle(tenant, user_id)
            if handle is None:
                return 0
            for chunk in _chunks(list(dict.fromkeys(object_id(i) for i in event_ids))):
                found = handle.query.fetch_objects(filters=Filter.by_id().contains_any(chunk), limit=len(chunk),
                                                   return_properties=["event_id"]).objects
                now = time.time()
                for o in found:
                    try:
                        handle.data.update(uuid=object_id(o.properties["event_id"]),
                                           properties={**props, "updated_at": now})
                    except UnexpectedStatusCodeError as exc:
                        if exc.status_code != 404:  # 404: deleted since it was found
                            raise
                    else:
                        updated += 1
        return updated

    def users(self, after: tuple[str, str] = ("", ""), limit: int = 1000) -> list[tuple[str, str]]:
        start = tuple(after)  # a list (from JSON) compares as the pair it holds
        if limit <= 0:
            return []
        page: list[tuple[str, str]] = []
        with _boundary("users"):
            names = list(self._collection.tenants.get())
            confirmed = set()  # read just now, so known to hold an event
            for name in names:
                if name not in self._tenants and self._user_of(name) is not None:
                    confirmed.add(name)
            candidates = sorted((self._tenants[n], n) for n in names if n in self._tenants)
            for pair, name in candidates:
                if pair > start and (name in confirmed or self._user_of(name) is not None):
                    page.append(pair)
                    if len(page) == limit:
                        break
        return page

    def _user_of(self, name: str) -> tuple[str, str] | None:
        """The (tenant, user) pair held by a Weaviate tenant, read from one of its objects (and remembered);
        None if it holds none, or was not written by this adapter."""
        rows = self._collection.with_tenant(name).query.fetch_objects(
            limit=1, return_properties=["tenant", "user_id"]).objects
        if not rows:
            return None
        tenant, user_id = rows[0].properties["tenant"], rows[0].properties["user_id"]
        if not isinstance(tenant, str) or not isinstance(user_id, str) or tenant_name(tenant, user_id) != name:
            return None
        pair = (tenant, user_id)
        self._tenants[name] = pair
        return pair

    def ping(self) -> None:
        with _boundary("ping"):
            ready = self.client.is_ready()
        if not ready:
            raise TransientError("weaviate is not ready")

    def _handle(self, tenant: str, user_id: str, create: bool = False) -> Any:
        """The collection bound to the user's Weaviate tenant; None if it does not exist and not ``create``."""
        name = tenant_name(tenant, user_id)
        if name not in self._tenants:
            if not self._collection.tenants.exists(name):
                if not create:
                    return None
                try:
                    self._collection.tenants.create(Tenant(name=name))
                except UnexpectedStatusCodeError:  # another process created it first
                    if not self._collection.tenants.exists(name):
                        raise
            self._tenants[name] = (tenant, user_id)
        return self._collection.with_tenant(name)


def _ensure_collection(client: weaviate.WeaviateClient, name: str) -> None:
    if client.collections.exists(name):
        _add_missing_properties(client.collections.use(name))
        return
    try:
        client.collections.create(
            name,
            properties=_PROPERTIES,
            vector_config=Configure.Vectors.self_provided(
                name=VECTOR, vector_index_config=Configure.VectorIndex.flat(distance_metric=VectorDistances.COSINE)),
            multi_tenancy_config=Configure.multi_tenancy(enabled=True, auto_tenant_creation=True,
                                                         auto_tenant_activation=True),
            inverted_index_config=Configure.inverted_index(bm25_b=0.75, bm25_k1=1.2,
                                                           stopwords_preset=StopwordsPreset.NONE),
        )
    except UnexpectedStatusCodeError:  # another process created it first
        if not client.collections.exists(name):
            raise


def _add_missing_properties(collection: Any) -> None:
    """Properties added since the collection was created (``noise``); objects written before lack them."""
    have = {p.name for p in collection.config.get(simple=True).properties}
    for prop in _PROPERTIES:
        if prop.name in have:
            continue
        try:
            collection.config.add_property(prop)
        except (WeaviateInvalidInputError, UnexpectedStatusCodeError):  # another process added it first
            if prop.name not in {p.name for p in collection.config.get(simple=True).properties}:
                raise


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


_ABSORBED = ("count", "confidence", "message_ids", "ts")


def _absorb(props: dict[str, Any], count: int, confidence: float, message_ids: list[str], ts: float) -> None:
    props["count"] = int(props["count"]) + count
    props["confidence"] = merged_confidence(props["confidence"], confidence)
    props["message_ids"] = list(dict.fromkeys([*(props.get("message_ids") or []), *message_ids]))
    props["ts"] = max(props["ts"], ts)


def _best_bm25(handle: Any, term: str, where: Any) -> float:
    hits = handle.query.bm25(term, query_properties=["tokens"], filters=where, limit=1,
                             return_metadata=MetadataQuery(score=True), return_properties=[])
    return float(hits.objects[0].metadata.score) if hits.objects else 0.0


def _where(types: Collection[EventType] | None, statuses: Collection[str],
           purposes: Collection[str] | None = None) -> Any:
    where = Filter.by_property("status").contains_any(sorted(statuses))
    if types:
        where &= Filter.by_property("event_type").contains_any(sorted(EventType(t).value for t in types))
    if purposes is not None:
        where &= Filter.by_property("purposes").contains_any(sorted(purposes))
    return where


def _only(where: Any, among: Collection[str] | None) -> Any:
    """``where``, narrowed to the rows ``among`` names when given (BM25's statistics stay the user's)."""
    if among is None:
        return where
    return where & Filter.by_id().contains_any(sorted({object_id(i) for i in among}))


def _properties(event: StoredEvent) -> dict[str, Any]:
    props = event.model_dump(include=set(_FIELDS) - {"sealed", "tokens"}, mode="json")
    props["said_at"] = event.said_at
    props["purposes"] = sorted(set(event.purposes))
    return {**props, "sealed": base64.b64encode(event.sealed).decode(), "tokens": " ".join(event.tokens)}


def _event(props: Mapping[str, Any]) -> StoredEvent:
    fields: dict[str, Any] = {f: props.get(f) for f in _FIELDS}
    fields["sealed"] = base64.b64decode(fields["sealed"] or b"")
    fields["tokens"] = (fields["tokens"] or "").split()
    fields["message_ids"] = list(fields["message_ids"] or [])
    fields["purposes"] = sorted(fields["purposes"] or [ANY])  # written before the property existed: ``ANY``
    fields["count"] = int(fields["count"])
    if fields["noise"] is None:  # written before the property existed
        fields["noise"] = 1.0
    fields["said_at"] = fields["said_at"] or 0.0
    fields["canonical_id"] = fields["canonical_id"] or None  # "" once a hand-over cleared it (``retract``)
    return StoredEvent(**fields)
