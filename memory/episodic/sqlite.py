"""Embedded episodic store: one SQLite file, vectors as float32 blobs, FTS5 (BM25) over hashed tokens."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from memory.episodic import index_tokens
from memory.models import Event, EventType
from memory.settings import Settings
from memory.sqlite import SQLiteFile, sqlite_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    rowid INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    ts REAL NOT NULL,
    event_type TEXT NOT NULL,
    role TEXT NOT NULL,
    keywords TEXT NOT NULL,
    summary TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    message_ids TEXT NOT NULL,
    confidence REAL NOT NULL,
    count INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_user ON events (tenant, user_id, event_type);
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5 (tokens, tokenize = 'unicode61');
"""

_COLUMNS = ("event_id, tenant, user_id, session_id, ts, event_type, role, keywords, summary, text_hash, "
            "message_ids, confidence, count")


class SQLiteEpisodicStore:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteFile(path, _SCHEMA, "episodic store")

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteEpisodicStore:
        return cls(sqlite_path(url))

    def upsert(self, events: Sequence[Event], vectors: np.ndarray) -> None:
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            for event, vector in zip(events, vectors, strict=True):
                row = conn.execute(
                    f"""INSERT INTO events ({_COLUMNS}, embedding, updated_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT (event_id) DO UPDATE SET
                          ts = excluded.ts, event_type = excluded.event_type, keywords = excluded.keywords,
                          summary = excluded.summary, text_hash = excluded.text_hash,
                          message_ids = excluded.message_ids, confidence = excluded.confidence,
                          embedding = excluded.embedding, updated_at = excluded.updated_at
                        RETURNING rowid""",
                    (event.event_id, event.tenant, event.user_id, event.session_id, event.ts,
                     event.event_type.value, event.role.value, json.dumps(event.keywords, ensure_ascii=False),
                     event.summary, event.text_hash, json.dumps(event.message_ids), event.confidence,
                     event.count, np.asarray(vector, dtype=np.float32).tobytes(), now),
                ).fetchone()
                tokens = " ".join(index_tokens(event.tenant, event.user_id, event.tokens))
                conn.execute("DELETE FROM events_fts WHERE rowid = ?", (row[0],))
                conn.execute("INSERT INTO events_fts (rowid, tokens) VALUES (?, ?)", (row[0], tokens))

        self._db.transaction(write)

    def keyword_search(self, tenant, user_id, tokens, types, k):
        hashed = sorted(set(index_tokens(tenant, user_id, tokens)))
        if not hashed:
            return []
        match = " OR ".join(f'"{t}"' for t in hashed)
        type_sql, type_args = _type_filter(types)
        sql = f"""SELECT e.event_id, -bm25(events_fts) FROM events_fts JOIN events e ON e.rowid = events_fts.rowid
                  WHERE events_fts MATCH ? AND e.tenant = ? AND e.user_id = ? {type_sql}
                  ORDER BY bm25(events_fts) LIMIT ?"""
        rows = self._db.run(lambda c: c.execute(sql, (match, tenant, user_id, *type_args, k)).fetchall())
        return [(r[0], float(r[1])) for r in rows]

    def vector_search(self, tenant, user_id, vector, types, k):
        type_sql, type_args = _type_filter(types)
        sql = f"SELECT event_id, embedding FROM events e WHERE tenant = ? AND user_id = ? {type_sql}"
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *type_args)).fetchall())
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        best = np.argsort(-sims)[:k]
        return [(rows[i][0], float(sims[i])) for i in best]

    def get(self, tenant, user_id, event_ids):
        if not event_ids:
            return []
        marks = ",".join("?" * len(event_ids))
        sql = f"SELECT {_COLUMNS} FROM events e WHERE tenant = ? AND user_id = ? AND event_id IN ({marks})"
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *event_ids)).fetchall())
        found = {r[0]: _event(r) for r in rows}
        return [found[i] for i in event_ids if i in found]

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())


def _type_filter(types: Collection[EventType] | None) -> tuple[str, list[str]]:
    if not types:
        return "", []
    values = sorted(EventType(t).value for t in types)
    return f"AND e.event_type IN ({','.join('?' * len(values))})", values


def _event(row: tuple) -> Event:
    return Event(
        event_id=row[0], tenant=row[1], user_id=row[2], session_id=row[3], ts=row[4], event_type=row[5],
        role=row[6], keywords=json.loads(row[7]), summary=row[8], text_hash=row[9],
        message_ids=json.loads(row[10]), confidence=row[11], count=row[12],
    )
