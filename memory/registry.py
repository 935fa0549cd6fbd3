"""Backends are chosen by URL scheme through this registry of lazy import paths.

Each role (episodic, graph, embedder, audit, reads, archive, keys) maps a scheme to ``"module:Class"``; the class is
imported only when a URL asks for it, and is built with ``Class.from_url(url, settings)``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Literal, overload

from memory.errors import ConfigurationError
from memory.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from memory.archive import ColdStore
    from memory.archive.local import LocalColdStore
    from memory.archive.s3 import S3ColdStore
    from memory.audit import AuditSink
    from memory.audit.elasticsearch import ElasticsearchAuditSink
    from memory.audit.file import FileAuditLog
    from memory.embedding import Embedder, SentenceTransformerEmbedder, USEEmbedder
    from memory.embedding_openai import OpenAIEmbedder
    from memory.episodic import EpisodicStore
    from memory.episodic.sqlite import SQLiteEpisodicStore
    from memory.episodic.weaviate import WeaviateEpisodicStore
    from memory.graph import GraphStore
    from memory.graph.neo4j import Neo4jGraphStore
    from memory.graph.sqlite import SQLiteGraphStore
    from memory.keystore import KeyStore
    from memory.keystore.sqlite import SQLiteKeyStore
    from memory.reads import ReadLog
    from memory.reads.sqlite import SQLiteReadLog
    from memory.state.user_keys import RedisKeyStore

BACKENDS: dict[str, dict[str, tuple[str, str]]] = {
    # role: {scheme: (import path, pip extra that installs its client)}
    "episodic": {
        "sqlite": ("memory.episodic.sqlite:SQLiteEpisodicStore", ""),
        "weaviate": ("memory.episodic.weaviate:WeaviateEpisodicStore", "weaviate"),
        "weaviates": ("memory.episodic.weaviate:WeaviateEpisodicStore", "weaviate"),
    },
    "graph": {
        "sqlite": ("memory.graph.sqlite:SQLiteGraphStore", ""),
        "neo4j": ("memory.graph.neo4j:Neo4jGraphStore", "neo4j"),
        "neo4j+s": ("memory.graph.neo4j:Neo4jGraphStore", "neo4j"),
        "bolt": ("memory.graph.neo4j:Neo4jGraphStore", "neo4j"),
        "bolt+s": ("memory.graph.neo4j:Neo4jGraphStore", "neo4j"),
    },
    "embedder": {
        "use": ("memory.embedding:USEEmbedder", ""),
        "sentence-transformers": ("memory.embedding:SentenceTransformerEmbedder", "torch"),
        "openai+http": ("memory.embedding_openai:OpenAIEmbedder", ""),
        "openai+https": ("memory.embedding_openai:OpenAIEmbedder", ""),
    },
    "audit": {
        "file": ("memory.audit.file:FileAuditLog", ""),
        "elasticsearch": ("memory.audit.elasticsearch:ElasticsearchAuditSink", "elasticsearch"),
        "elasticsearchs": ("memory.audit.elasticsearch:ElasticsearchAuditSink", "elasticsearch"),
    },
    "reads": {
        "sqlite": ("memory.reads.sqlite:SQLiteReadLog", ""),
    },
    "keys": {
        "sqlite": ("memory.keystore.sqlite:SQLiteKeyStore", ""),
        "redis": ("memory.state.user_keys:RedisKeyStore", ""),
        "rediss": ("memory.state.user_keys:RedisKeyStore", ""),
    },
    "archive": {
        "file": ("memory.archive.local:LocalColdStore", ""),
        "s3": ("memory.archive.s3:S3ColdStore", "s3"),
    },
}


if TYPE_CHECKING:
    # The table above names its classes by import path, so that a backend's client is imported only when a URL
    # asks for it; here (for mypy only, never run) every class in it is checked against its role's port.
    _EPISODIC: list[Callable[[str, Settings], EpisodicStore]] = [SQLiteEpisodicStore.from_url,
                                                                WeaviateEpisodicStore.from_url]
    _GRAPH: list[Callable[[str, Settings], GraphStore]] = [SQLiteGraphStore.from_url, Neo4jGraphStore.from_url]
    _EMBEDDER: list[Callable[[str, Settings], Embedder]] = [USEEmbedder.from_url,
                                                            SentenceTransformerEmbedder.from_url,
                                                            OpenAIEmbedder.from_url]
    _AUDIT: list[Callable[[str, Settings], AuditSink]] = [FileAuditLog.from_url, ElasticsearchAuditSink.from_url]
    _READS: list[Callable[[str, Settings], ReadLog]] = [SQLiteReadLog.from_url]
    _KEYS: list[Callable[[str, Settings], KeyStore]] = [SQLiteKeyStore.from_url, RedisKeyStore.from_url]
    _ARCHIVE: list[Callable[[str, Settings], ColdStore]] = [LocalColdStore.from_url, S3ColdStore.from_url]


@overload
def open_backend(role: Literal["episodic"], url: str, settings: Settings) -> EpisodicStore: ...
@overload
def open_backend(role: Literal["graph"], url: str, settings: Settings) -> GraphStore: ...
@overload
def open_backend(role: Literal["embedder"], url: str, settings: Settings) -> Embedder: ...
@overload
def open_backend(role: Literal["audit"], url: str, settings: Settings) -> AuditSink: ...
@overload
def open_backend(role: Literal["reads"], url: str, settings: Settings) -> ReadLog: ...
@overload
def open_backend(role: Literal["keys"], url: str, settings: Settings) -> KeyStore: ...
@overload
def open_backend(role: Literal["archive"], url: str, settings: Settings) -> ColdStore: ...


def open_backend(role: str, url: str, settings: Settings
                 ) -> EpisodicStore | GraphStore | Embedder | AuditSink | ReadLog | KeyStore | ColdStore:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    known = BACKENDS[role]
    if scheme not in known:
        raise ConfigurationError(
            f"unknown {role} backend {scheme or url!r}; use one of: {', '.join(s + '://' for s in known)}"
        )
    path, extra = known[scheme]
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"pip install 'mneme[{extra}]'" if extra else "reinstall mneme"
        raise ConfigurationError(f"{role} backend {scheme!r} is not installed ({exc}); {hint}") from exc
    # the class named for this role in BACKENDS: checked against the role's port above
    backend: EpisodicStore | GraphStore | Embedder | AuditSink | ReadLog | KeyStore | ColdStore = (
        getattr(module, attr).from_url(url, settings))
    return backend
