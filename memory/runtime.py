"""The resources one process needs, built lazily from settings: Redis state, the stores, the embedder.

The API and every worker build one ``Runtime`` (``get_runtime()``); tests build their own.
"""

from __future__ import annotations

import threading
import time
from functools import cached_property, lru_cache

import numpy as np

from memory.archive import ColdStore
from memory.audit import AuditSink
from memory.beliefs import Beliefs
from memory.crypto import UserKeys, load_master_key
from memory.embedding import Embedder, RecentVectors
from memory.episodic import EpisodicStore
from memory.errors import TransientError
from memory.events import EpisodicMemory
from memory.graph import GraphStore
from memory.llm import LLMExtractor
from memory.registry import open_backend
from memory.settings import Settings, get_settings
from memory.state import RedisState
from memory.tuning import QueryAdapter, adapters_dir
from memory.userhash import hashing_key

ADAPTER_CHECK_S = 2.0


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._embedder_lock = threading.Lock()
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
    def episodic_store(self) -> EpisodicStore:
        return open_backend("episodic", self.settings.episodic, self.settings)

    @cached_property
    def user_keys(self) -> UserKeys:
        return UserKeys.from_settings(self.settings)

    @cached_property
    def episodic(self) -> EpisodicMemory:
        return EpisodicMemory(self.episodic_store, self.user_keys, self.settings)

    @cached_property
    def graph(self) -> GraphStore:
        return open_backend("graph", self.settings.graph, self.settings)

    @cached_property
    def beliefs(self) -> Beliefs:
        return Beliefs(self.graph, self.state.reviews, self.settings)

    @cached_property
    def llm(self) -> LLMExtractor:
        return LLMExtractor(self.settings, self.state.llm_usage)

    @cached_property
    def archive(self) -> ColdStore:
        return open_backend("archive", self.settings.archive, self.settings)

    @cached_property
    def audit(self) -> AuditSink:
        return open_backend("audit", self.settings.audit, self.settings)

    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:  # the model loads once even if two requests race for it
            if "_embedder" not in self.__dict__:
                model = open_backend("embedder", self.settings.embedder_url, self.settings)
                self.__dict__["_embedder"] = RecentVectors(model)
            return self.__dict__["_embedder"]

    @property
    def warm(self) -> bool:
        """The model is loaded and has encoded once (the first encode is the slow one)."""
        return "_warm" in self.__dict__

    def warm_up(self) -> None:
        """Load the embedder and run a real encode, and open the stores, so the first request after a start
        is not the one that pays for it. A store that cannot open now is reported by ``health``."""
        self.embedder.embed(["warm up", "预热一下"])
        for store in ("episodic_store", "graph"):
            try:
                getattr(self, store).ping()
            except Exception:  # noqa: BLE001, S110 - health names what is wrong with a store
                pass
        self.__dict__["_warm"] = True

    def embed_query(self, text: str) -> np.ndarray:
        """A query vector, through the published LoRA query adapter when there is one. The published
        version is re-read at most every ``ADAPTER_CHECK_S``, so a new adapter is live within seconds."""
        vector = self.embedder.embed([text])
        adapter = self._query_adapter()
        return (adapter.apply(vector) if adapter else vector)[0]

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
        checks = {
            "redis": lambda: self.state.ping(),
            "episodic": lambda: self.episodic_store.ping(),
            "graph": lambda: self.graph.ping(),
            "audit": lambda: self.audit.ping(),
            "archive": lambda: self.archive.ping(),
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
def get_runtime() -> Runtime:
    return Runtime(get_settings())
