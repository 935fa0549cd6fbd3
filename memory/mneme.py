"""The composition root: one process's Mneme, built lazily from settings.

It opens the ports (the episodic store, the graph, the cold archive, the audit sink, the read log:
``memory.registry``)
and hands each to the service that owns it; the rest of Mneme talks to the services, never to a port:

- ``working``: working memory (``memory.state.working``), and the rest of the Redis state (``state``);
- ``episodic``: the event layer and the deep tier (``memory.services.episodic``);
- ``semantic``: beliefs and their reviews (``memory.services.semantic``);
- ``privacy``: consent, child mode, erasure, export (``memory.services.privacy``);
- ``maintenance``: archival, noise, compaction, and the cold archive (``memory.services.maintenance``);
- ``trail``: the audit trail, through the outbox (``memory.services.trail``);
- ``reads``: who was shown what about a user (``memory.services.reads``);
- ``embedder`` / ``embed_query`` and ``llm``: the models.

The API and every worker build one ``Mneme`` (``get_mneme()``); tests build their own.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from functools import cached_property, lru_cache

import numpy as np

from memory import page_links
from memory.archive import ColdStore
from memory.audit import AuditSink
from memory.crypto import UserKeys, load_master_key
from memory.embedding import RecentVectors, chance_similarity
from memory.episodic import EpisodicStore
from memory.errors import TransientError
from memory.graph import GraphStore
from memory.llm import LLMExtractor
from memory.reads import ReadLog
from memory.registry import open_backend
from memory.services.episodic import EpisodicMemory
from memory.services.maintenance import Maintenance
from memory.services.privacy import Privacy
from memory.services.reads import ReadAudit
from memory.services.semantic import SemanticMemory
from memory.services.trail import AuditTrail
from memory.settings import Settings, get_settings
from memory.state import RedisState
from memory.state.working import WorkingMemory
from memory.text import tokenize
from memory.tuning import QueryAdapter, adapters_dir
from memory.userdata import UserData, UserKey
from memory.userhash import hashing_key
from memory.vocabulary import Vocabulary, load_vocabulary

ADAPTER_CHECK_S = 2.0
WARM_UP_TEXTS = ("warm up", "预热一下")  # what a process embeds as it warms up (``Mneme.warm_up``)


class Mneme:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._embedder_lock = threading.Lock()
        self._embedder: RecentVectors | None = None
        self._warm = False
        self._adapter: QueryAdapter | None = None
        self._adapter_checked = -ADAPTER_CHECK_S

    @cached_property
    def state(self) -> RedisState:
        """Everything kept in Redis (``memory.state``): working memory, jobs, policies, reviews, …"""
        return RedisState(self.settings, self.user_hash_key, seal_key=lambda t, u: self.user_keys.get(t, u),
                          open_key=lambda t, u: self.user_keys.get(t, u, create=False))

    def close(self) -> None:
        """Free the connections this process opened (a CLI run, a test)."""
        if "state" in self.__dict__:
            self.state.close()

    @cached_property
    def user_hash_key(self) -> bytes:
        """Keys every hashed user id (``memory.userhash``): audit records, receipts, tombstones."""
        return hashing_key(load_master_key(self.settings))

    @cached_property
    def page_key(self) -> bytes:
        """Signs and checks memory-page links (``memory.page_links``)."""
        return page_links.page_key(load_master_key(self.settings))

    @cached_property
    def user_keys(self) -> UserKeys:
        return UserKeys.from_settings(self.settings)

    # --- the ports, each handed to the service that owns it -------------------------------------------
    @cached_property
    def _episodic_store(self) -> EpisodicStore:
        return open_backend("episodic", self.settings.episodic, self.settings)

    @cached_property
    def _graph(self) -> GraphStore:
        return open_backend("graph", self.settings.graph, self.settings)

    @cached_property
    def _archive(self) -> ColdStore:
        return open_backend("archive", self.settings.archive, self.settings)

    @cached_property
    def _audit_sink(self) -> AuditSink:
        return open_backend("audit", self.settings.audit, self.settings)

    @cached_property
    def _read_log(self) -> ReadLog:
        return open_backend("reads", self.settings.reads, self.settings)

    # --- the services ---------------------------------------------------------------------------------
    @property
    def working(self) -> WorkingMemory:
        return self.state.working

    @cached_property
    def trail(self) -> AuditTrail:
        return AuditTrail(self.state.outbox, self._audit_sink, self._read_log, self.state.counters,
                          self.user_hash_key)

    @cached_property
    def reads(self) -> ReadAudit:
        return ReadAudit(self._read_log, self.trail, self.user_hash_key, self.settings.read_audit)

    @cached_property
    def episodic(self) -> EpisodicMemory:
        return EpisodicMemory(self._episodic_store, self.user_keys, self.settings)

    @cached_property
    def semantic(self) -> SemanticMemory:
        policies = self.state.policies
        return SemanticMemory(self._graph, self.state.reviews, self.trail, self.settings, self.vocabulary,
                              consent=lambda tenant, user_id: policies.get(tenant, user_id).consent)

    @cached_property
    def vocabulary(self) -> Vocabulary:
        """The relations this deployment keeps (``MNEME_VOCABULARY_FILE``; ``memory.vocabulary``)."""
        return load_vocabulary(self.settings.vocabulary_file)

    @cached_property
    def maintenance(self) -> Maintenance:
        return Maintenance(self._episodic_store, self.episodic, self._archive, self.settings)

    @cached_property
    def privacy(self) -> Privacy:
        return Privacy(self.state, self.episodic, self.semantic, self.maintenance, self.user_keys, self.trail,
                       self.user_data, self.settings, self.user_hash_key)

    def user_data(self) -> tuple[UserData, ...]:
        """Every store of user data (``memory.userdata``), in erasure order: the key last."""
        state = self.state
        return (state.working, state.policies, state.reviews, state.devices, state.dead_letters,
                state.feedback_pairs, self.episodic, self.semantic, self.maintenance, self.reads,
                UserKey(self.user_keys))

    @cached_property
    def llm(self) -> LLMExtractor:
        return LLMExtractor(self.settings, self.state.llm_usage, self.vocabulary)

    @property
    def embedder(self) -> RecentVectors:
        with self._embedder_lock:  # the model loads once even if two requests race for it
            if self._embedder is None:
                self._embedder = RecentVectors(open_backend("embedder", self.settings.embedder_url, self.settings))
            return self._embedder

    @cached_property
    def chance_similarity(self) -> float:
        """The embedder's cosine between unrelated texts (``memory.embedding.chance_similarity``)."""
        return chance_similarity(self.embedder)

    @property
    def warm(self) -> bool:
        """The model is loaded and has encoded once (the first encode is the slow one)."""
        return self._warm

    def warm_up(self, recall: bool = True) -> None:
        """Load the embedder and run a real encode, and open the stores, so the first request after a start
        is not the one that pays for it. A store that cannot open now is reported by ``health``.
        ``recall``: the process answers recalls (the API): load the word segmenter's dictionary too (~33 MB)
        and measure the embedder's chance similarity (``CHANCE_TEXTS``); the workers need neither."""
        self.embedder.embed(list(WARM_UP_TEXTS))
        if recall:
            tokenize("预热一下")
            _ = self.chance_similarity
        pings: tuple[Callable[[], None], ...] = (lambda: self.episodic.ping(), lambda: self.semantic.ping())
        for ping in pings:
            try:
                ping()
            except Exception:  # noqa: BLE001, S110 - health names what is wrong with a store
                pass
        # what is loaded now lives as long as the process: out of the collector's sight, a full collection
        # takes microseconds instead of ~40 ms (the segmenter's dictionary alone is ~100k objects), a pause
        # every request in flight would wait for
        gc.freeze()
        self._warm = True

    def embed_query(self, text: str) -> np.ndarray:
        """A query vector, through the published LoRA query adapter when there is one. The published
        version is re-read at most every ``ADAPTER_CHECK_S``, so a new adapter is live within seconds."""
        vector = self.embedder.embed([text])
        adapter = self._query_adapter()
        adapted: np.ndarray = adapter.apply(vector) if adapter else vector
        first: np.ndarray = adapted[0]
        return first

    def _query_adapter(self) -> QueryAdapter | None:
        now = time.monotonic()
        if now - self._adapter_checked >= ADAPTER_CHECK_S:
            self._adapter_checked = now
            try:
                version = self.state.adapter.current()
            except TransientError:
                version = self._adapter.version if self._adapter else None  # keep what we have
            if not version:
                self._adapter = None
            elif self._adapter is None or self._adapter.version != version:
                self._adapter = QueryAdapter.load(adapters_dir(self.settings.data_dir), version, self.embedder.dim)
        return self._adapter

    def health(self) -> dict[str, str]:
        """Each backend: "ok" or what is wrong with it."""
        checks: dict[str, Callable[[], None]] = {
            "redis": lambda: self.state.ping(),
            "episodic": lambda: self.episodic.ping(),
            "graph": lambda: self.semantic.ping(),
            "audit": lambda: self.trail.sink.ping(),
            "reads": lambda: self.reads.ping(),
            "archive": lambda: self.maintenance.ping(),
        }
        report = {}
        for name, check in checks.items():
            try:
                check()
                report[name] = "ok"
            except Exception as exc:  # noqa: BLE001 - health reports every failure, whatever it is
                report[name] = f"unreachable: {exc}"
        report["embedder"] = "ok" if self.warm else "loading"
        return report


@lru_cache(maxsize=1)
def get_mneme() -> Mneme:
    return Mneme(get_settings())
