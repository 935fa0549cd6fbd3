"""Embedded episodic store: one SQLite file, vectors as float32 blobs searched exactly per user with
numpy, FTS5 (BM25) over keyed token hashes. Each ``add`` is one transaction."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from memory.episodic import UPDATABLE, AddReport, Evicted, StoredEvent, eviction_value, merged_confidence
from memory.models import EventType
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
    lang TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    message_ids TEXT NOT NULL,
    confidence REAL NOT NULL,
    count INTEGER NOT NULL,
    weight REAL NOT NULL,
    noise REAL NOT NULL,
    status TEXT NOT NULL,
    sealed BLOB NOT NULL,
    embedding BLOB NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_user ON events (tenant, user_id, status, event_type);
CREATE TABLE IF NOT EXISTS aliases (event_id TEXT PRIMARY KEY, canonical_id TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5 (tokens, tokenize = 'unicode61');
"""

_FIELDS = ("event_id", "tenant", "user_id", "session_id", "ts", "event_type", "role", "lang", "text_hash",
           "message_ids", "confidence", "count", "weight", "noise", "status", "sealed")
_COLUMNS = ", ".join(_FIELDS)


class SQLiteEpisodicStore:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteFile(path, _SCHEMA, "episodic store")

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteEpisodicStore:
        return cls(sqlite_path(url))

    def add(self, events: Sequence[StoredEvent], vectors: np.ndarray, merge_threshold: float,
            cap: int) -> AddReport:
        report = AddReport()
        users = {(e.tenant, e.user_id) for e in events}

        def write(conn: sqlite3.Connection) -> None:
            for event, vector in zip(events, vectors, strict=True):
                _add_one(conn, event, np.asarray(vector, dtype=np.float32), merge_threshold, report)
            for tenant, user_id in users:
                report.evicted += _enforce_cap(conn, tenant, user_id, cap)

        self._db.transaction(write)
        return report

    def bulk_insert(self, events: Sequence[StoredEvent], vectors: np.ndarray) -> int:
        """For benchmarks and bulk imports only, not the online path (that is ``add``): insert events as
        they are, in one transaction, with no duplicate check, merge or cap. Their ids must be new."""
        now = time.time()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        insert = (f"INSERT INTO events (rowid, {_COLUMNS}, embedding, updated_at) "
                  f"VALUES ({','.join('?' * (len(_FIELDS) + 3))})")

        def write(conn: sqlite3.Connection) -> int:
            first = conn.execute("SELECT COALESCE(MAX(rowid), 0) + 1 FROM events").fetchone()[0]
            rows, fts = [], []
            for i, event in enumerate(events):
                values = [getattr(event, f) for f in _FIELDS]
                values[_FIELDS.index("event_type")] = EventType(event.event_type).value
                values[_FIELDS.index("role")] = getattr(event.role, "value", event.role)
                values[_FIELDS.index("message_ids")] = json.dumps(event.message_ids)
                rows.append((first + i, *values, vectors[i].tobytes(), now))
                fts.append((first + i, " ".join(event.tokens)))
            cache = conn.execute("PRAGMA cache_size").fetchone()[0]
            conn.execute("PRAGMA cache_size = -262144")  # 256 MiB while loading: the indexes take random inserts
            try:
                conn.executemany(insert, rows)
                conn.executemany("INSERT INTO events_fts (rowid, tokens) VALUES (?, ?)", fts)
            finally:
                conn.execute(f"PRAGMA cache_size = {int(cache)}")
            return len(rows)

        return self._db.transaction(write)

    def keyword_search(self, tenant, user_id, tokens, types, k):
        if not tokens:
            return []
        match = " OR ".join(f'"{t}"' for t in sorted(set(tokens)))
        type_sql, type_args = _type_filter(types)
        sql = f"""SELECT e.event_id, -bm25(events_fts) FROM events_fts JOIN events e ON e.rowid = events_fts.rowid
                  WHERE events_fts MATCH ? AND e.tenant = ? AND e.user_id = ? AND e.status = 'live' {type_sql}
                  ORDER BY bm25(events_fts) LIMIT ?"""
        rows = self._db.run(lambda c: c.execute(sql, (match, tenant, user_id, *type_args, k)).fetchall())
        return [(r[0], float(r[1])) for r in rows]

    def vector_search(self, tenant, user_id, vector, types, k):
        ids, matrix = self._db.run(lambda c: _live_vectors(c, tenant, user_id, types))
        if not ids:
            return []
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        best = np.argsort(-sims)[:k]
        return [(ids[i], float(sims[i])) for i in best]

    def get(self, tenant, user_id, event_ids):
        if not event_ids:
            return []
        marks = ",".join("?" * len(event_ids))
        sql = f"SELECT {_COLUMNS} FROM events WHERE tenant = ? AND user_id = ? AND event_id IN ({marks})"
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *event_ids)).fetchall())
        found = {r[0]: _event(r) for r in rows}
        return [found[i] for i in event_ids if i in found]

    def live_count(self, tenant, user_id):
        sql = "SELECT COUNT(*) FROM events WHERE tenant = ? AND user_id = ? AND status = 'live'"
        return self._db.run(lambda c: c.execute(sql, (tenant, user_id)).fetchone()[0])

    def dump(self, tenant, user_id, *, types=None, before_ts=None, statuses=("live",), limit=10_000):
        type_sql, args = _type_filter(types)
        if before_ts is not None:
            type_sql += " AND e.ts < ?"
            args.append(before_ts)
        marks = ",".join("?" * len(statuses))
        sql = (f"SELECT {_COLUMNS}, embedding FROM events e WHERE tenant = ? AND user_id = ? "
               f"AND status IN ({marks}) {type_sql} ORDER BY ts, event_id LIMIT ?")
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *statuses, *args, limit)).fetchall())
        return [(_event(r[:-1]), np.frombuffer(r[-1], dtype=np.float32).copy()) for r in rows]

    def delete(self, tenant, user_id, event_ids):
        if not event_ids:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            marks = ",".join("?" * len(event_ids))
            where = f"tenant = ? AND user_id = ? AND event_id IN ({marks})"
            args = (tenant, user_id, *event_ids)
            conn.execute(f"DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE {where})", args)
            conn.execute(f"DELETE FROM aliases WHERE canonical_id IN (SELECT event_id FROM events WHERE {where})",
                         args)
            return conn.execute(f"DELETE FROM events WHERE {where}", args).rowcount

        removed = self._db.transaction(run)
        self._db.checkpoint()
        return removed

    def update(self, tenant, user_id, event_ids, **fields):
        unknown = set(fields) - UPDATABLE
        if unknown or not event_ids or not fields:
            if unknown:
                raise ValueError(f"cannot update {sorted(unknown)}; updatable: {sorted(UPDATABLE)}")
            return 0
        sets = ", ".join(f"{name} = ?" for name in sorted(fields))
        marks = ",".join("?" * len(event_ids))
        sql = (f"UPDATE events SET {sets}, updated_at = ? WHERE tenant = ? AND user_id = ? "
               f"AND event_id IN ({marks})")
        args = (*(fields[n] for n in sorted(fields)), time.time(), tenant, user_id, *event_ids)
        return self._db.run(lambda c: c.execute(sql, args).rowcount)

    def users(self, after=("", ""), limit=1000):
        sql = ("SELECT DISTINCT tenant, user_id FROM events WHERE (tenant, user_id) > (?, ?) "
               "ORDER BY tenant, user_id LIMIT ?")
        return [tuple(r) for r in self._db.run(lambda c: c.execute(sql, (*after, limit)).fetchall())]

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())


def _add_one(conn: sqlite3.Connection, event: StoredEvent, vector: np.ndarray, threshold: float,
             report: AddReport) -> None:
    known = conn.execute("SELECT 1 FROM events WHERE event_id = ? UNION ALL "
                         "SELECT 1 FROM aliases WHERE event_id = ?", (event.event_id, event.event_id)).fetchone()
    if known:
        report.known.append(event.event_id)
        return
    ids, matrix = _live_vectors(conn, event.tenant, event.user_id, [event.event_type], role=event.role.value)
    if ids:
        sims = matrix @ vector
        best = int(np.argmax(sims))
        if sims[best] >= threshold:
            target = ids[best]
            row = conn.execute("SELECT confidence, message_ids FROM events WHERE event_id = ?", (target,)).fetchone()
            message_ids = list(dict.fromkeys(json.loads(row[1]) + event.message_ids))
            conn.execute(
                "UPDATE events SET count = count + 1, confidence = ?, message_ids = ?, ts = MAX(ts, ?), "
                "updated_at = ? WHERE event_id = ?",
                (merged_confidence(row[0], event.confidence), json.dumps(message_ids), event.ts, time.time(),
                 target),
            )
            conn.execute("INSERT INTO aliases VALUES (?, ?)", (event.event_id, target))
            report.merged[event.event_id] = target
            return
    values = [getattr(event, f) for f in _FIELDS]
    values[_FIELDS.index("event_type")] = event.event_type.value
    values[_FIELDS.index("role")] = event.role.value
    values[_FIELDS.index("message_ids")] = json.dumps(event.message_ids)
    rowid = conn.execute(
        f"INSERT INTO events ({_COLUMNS}, embedding, updated_at) VALUES ({','.join('?' * (len(_FIELDS) + 2))}) "
        "RETURNING rowid", (*values, vector.tobytes(), time.time()),
    ).fetchone()[0]
    conn.execute("INSERT INTO events_fts (rowid, tokens) VALUES (?, ?)", (rowid, " ".join(event.tokens)))
    report.inserted.append(event.event_id)


def _enforce_cap(conn: sqlite3.Connection, tenant: str, user_id: str, cap: int) -> list[Evicted]:
    live = conn.execute("SELECT COUNT(*) FROM events WHERE tenant = ? AND user_id = ? AND status = 'live'",
                        (tenant, user_id)).fetchone()[0]
    if live <= cap:
        return []
    rows = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE tenant = ? AND user_id = ? AND status = 'live'",
                        (tenant, user_id)).fetchall()
    now = time.time()
    doomed = sorted((_event(r) for r in rows), key=lambda e: eviction_value(e, now))[: live - cap]
    conn.executemany("UPDATE events SET status = 'evicted', updated_at = ? WHERE event_id = ?",
                     [(now, e.event_id) for e in doomed])
    return [Evicted(tenant=tenant, user_id=user_id, event_id=e.event_id, event_type=e.event_type) for e in doomed]


def _live_vectors(conn: sqlite3.Connection, tenant: str, user_id: str, types: Collection[EventType] | None,
                  role: str | None = None) -> tuple[list[str], np.ndarray]:
    type_sql, args = _type_filter(types)
    if role:
        type_sql += " AND e.role = ?"
        args.append(role)
    rows = conn.execute(f"SELECT event_id, embedding FROM events e WHERE tenant = ? AND user_id = ? "
                        f"AND status = 'live' {type_sql}", (tenant, user_id, *args)).fetchall()
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return [r[0] for r in rows], matrix


def _type_filter(types: Collection[EventType] | None) -> tuple[str, list[str]]:
    if not types:
        return "", []
    values = sorted(EventType(t).value for t in types)
    return f"AND e.event_type IN ({','.join('?' * len(values))})", values


def _event(row: tuple) -> StoredEvent:
    fields = dict(zip(_FIELDS, row, strict=True))
    fields["message_ids"] = json.loads(fields["message_ids"])
    return StoredEvent(**fields)
