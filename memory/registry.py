"""Backends are chosen by URL scheme through this registry of lazy import paths.

Each role (episodic, graph, embedder, audit, archive, keys) maps a scheme to ``"module:Class"``; the class is
imported only when a URL asks for it, and is built with ``Class.from_url(url, settings)``.
"""

from __future__ import annotations

import importlib
from typing import Any

from memory.errors import ConfigurationError
from memory.settings import Settings

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
        "sentence-transformers": ("memory.embedding:SentenceTransformerEmbedder", ""),
    },
    "audit": {
        "file": ("memory.audit.file:FileAuditLog", ""),
        "elasticsearch": ("memory.audit.elasticsearch:ElasticsearchAuditSink", "elasticsearch"),
        "elasticsearchs": ("memory.audit.elasticsearch:ElasticsearchAuditSink", "elasticsearch"),
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


def open_backend(role: str, url: str, settings: Settings) -> Any:
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
    return getattr(module, attr).from_url(url, settings)
