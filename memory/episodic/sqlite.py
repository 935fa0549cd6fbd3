"""Embedded episodic store: one SQLite file, vectors as float32 blobs searched exactly per user with
numpy, FTS5 over keyed token hashes finding the rows a query's tokens match and BM25 computed here with
the user's own statistics (FTS5's ``bm25()`` counts every user's rows). Each ``add`` is one transaction.

Rows are stored by user: events and vectors are keyed (tenant, user, event) WITHOUT ROWID in 16 KiB
pages, so one user's rows sit together on disk and a search reads a few contiguous pages instead of one
page per row scattered over the file in arrival order (at 2 M messages that was most of a recall's time).
Vectors have their own table, so a vector scan does not read sealed text. ``doc`` numbers a row for the
full-text index, which needs integers."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
from memory.models import EventType, Role
from memory.provenance import Messages
from memory.settings import Settings
from memory.sqlite import SQLiteFile, sqlite_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    event_id TEXT NOT NULL,
    doc INTEGER NOT NULL UNIQUE,
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
    canonical_id TEXT,
    sealed BLOB NOT NULL,
    said_at REAL NOT NULL DEFAULT 0,
    tokens TEXT NOT NULL DEFAULT '',
    length INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    purposes TEXT NOT NULL DEFAULT '["*"]',
    PRIMARY KEY (tenant, user_id, event_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_by_user ON events (tenant, user_id, status, event_type);
-- covers a user's BM25 statistics (distinct texts, mean length): read from the index, not from every row
CREATE INDEX IF NOT EXISTS events_stats ON events (tenant, user_id, status, text_hash, length);
CREATE INDEX IF NOT EXISTS events_by_canonical ON events (canonical_id) WHERE canonical_id IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5 (tokens, tokenize = 'unicode61');
CREATE TABLE IF NOT EXISTS vectors (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    status TEXT NOT NULL,
    event_type TEXT NOT NULL,
    role TEXT NOT NULL,
    embedding BLOB NOT NULL,
    purposes TEXT NOT NULL DEFAULT '["*"]',
    PRIMARY KEY (tenant, user_id, event_id)
) WITHOUT ROWID;
-- a user's live rows without their history (merge candidates, the cap): a long-term user holds thousands of rows
CREATE INDEX IF NOT EXISTS vectors_by_status ON vectors (tenant, user_id, status, event_type);
"""
#: Columns a file written by an earlier version lacks, added when it is opened (what it held was collected
#: before purposes were recorded: ``memory.purposes.ANY``).
_ADDED = (("events", "purposes", """TEXT NOT NULL DEFAULT '["*"]'"""),
          ("vectors", "purposes", """TEXT NOT NULL DEFAULT '["*"]'"""))
SEARCH_CHUNK = 1024  # rows a vector search reads at a time (2 MB of vectors)
PAGE_SIZE = 16384  # a 2 KiB vector row stays inside its page (overflow pages would scatter it again)
_VECTOR_COLUMNS = "tenant, user_id, event_id, status, event_type, role, embedding, purposes"
_VECTOR_JOIN = "JOIN vectors v ON v.tenant = e.tenant AND v.user_id = e.user_id AND v.event_id = e.event_id"

_FIELDS = ("event_id", "tenant", "user_id", "session_id", "ts", "event_type", "role", "lang", "text_hash",
           "message_ids", "confidence", "count", "weight", "noise", "status", "canonical_id", "said_at", "sealed",
           "purposes")
_COLUMNS = ", ".join(_FIELDS)
_ONE = "tenant = ? AND user_id = ? AND event_id = ?"
K1, B = 1.2, 0.75  # BM25
_Matched = tuple[str, str, str, int, int]  # a row keyword search matched: event id, text hash, tokens, length, type ok


class SQLiteEpisodicStore:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteFile(path, _SCHEMA, "episodic store", page_size=PAGE_SIZE, added=_ADDED)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteEpisodicStore:
        return cls(sqlite_path(url))

    def add(self, events: Sequence[StoredEvent], vectors: np.ndarray, merge_threshold: float,
            cap: int, consolidate_threshold: float = 0.8) -> AddReport:
        report = AddReport()
        users = sorted({(e.tenant, e.user_id) for e in events})
        # the events a new one may merge with are read once a batch for its kind (an imported history brings
        # many of one user's events) and let go after the kind's last event (up to ~400 KB each)
        kinds = [_kind(e) for e in events]
        left = Counter(kinds)
        candidates: dict[_Kind, _Candidates] = {}

        def write(conn: sqlite3.Connection) -> None:
            for event, kind, vector in zip(events, kinds, vectors, strict=True):
                _add_one(conn, event, kind, np.asarray(vector, dtype=np.float32), merge_threshold, report,
                         candidates)
                left[kind] -= 1
                if not left[kind]:
                    candidates.pop(kind, None)
            for tenant, user_id in users:
                _enforce_cap(conn, tenant, user_id, cap, consolidate_threshold, report)

        self._db.transaction(write)
        return report

    def consolidate(self, tenant: str, user_id: str, cap: int, consolidate_threshold: float = 0.8) -> AddReport:
        report = AddReport()
        self._db.transaction(lambda c: _enforce_cap(c, tenant, user_id, cap, consolidate_threshold, report))
        return report

    def bulk_insert(self, events: Sequence[StoredEvent], vectors: np.ndarray) -> int:
        """For benchmarks and bulk imports only, not the online path (that is ``add``): insert events as
        they are, in one transaction, with no duplicate check, merge or cap. Their ids must be new."""
        now = time.time()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        insert = (f"INSERT INTO events (doc, {_COLUMNS}, tokens, length, updated_at) "
                  f"VALUES ({','.join('?' * (len(_FIELDS) + 4))})")

        def write(conn: sqlite3.Connection) -> int:
            first = _next_doc(conn)
            rows, fts, vecs = [], [], []
            for i, event in enumerate(events):
                values = [getattr(event, f) for f in _FIELDS]
                values[_FIELDS.index("said_at")] = event.said_at or event.ts
                values[_FIELDS.index("event_type")] = EventType(event.event_type).value
                values[_FIELDS.index("role")] = getattr(event.role, "value", event.role)
                values[_FIELDS.index("message_ids")] = json.dumps(event.message_ids)
                values[_FIELDS.index("purposes")] = _purposes(event.purposes)
                rows.append((first + i, *values, " ".join(event.tokens), len(event.tokens), now))
                fts.append((first + i, " ".join(event.tokens)))
                vecs.append((event.tenant, event.user_id, event.event_id, event.status,
                             values[_FIELDS.index("event_type")], values[_FIELDS.index("role")], vectors[i].tobytes(),
                             values[_FIELDS.index("purposes")]))
            cache = conn.execute("PRAGMA cache_size").fetchone()[0]
            conn.execute("PRAGMA cache_size = -262144")  # 256 MiB while loading: the indexes take random inserts
            try:
                conn.executemany(insert, rows)
                conn.executemany("INSERT INTO events_fts (rowid, tokens) VALUES (?, ?)", fts)
                conn.executemany(f"INSERT INTO vectors ({_VECTOR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", vecs)
            finally:
                conn.execute(f"PRAGMA cache_size = {int(cache)}")
            return len(rows)

        return self._db.transaction(write)

    def keyword_search(self, tenant: str, user_id: str, tokens: Sequence[str], types: Collection[EventType] | None,
                       k: int, statuses: Collection[str] = SEARCHABLE,
                       purposes: Collection[str] | None = None,
                       among: Collection[str] | None = None) -> list[tuple[str, float]]:
        wanted = sorted(set(tokens))
        if not wanted or not statuses or (purposes is not None and not purposes) or (among is not None and not among):
            return []
        status_sql, status_args = _status_filter(statuses)
        serving_sql, serving_args = _purpose_filter(purposes)
        type_args = sorted(EventType(t).value for t in types or ())
        type_ok = f"e.event_type IN ({','.join('?' * len(type_args))})" if type_args else "1"
        among_sql, among_args = _among_filter(among)  # rows outside it still count in the statistics
        type_ok = f"{type_ok} {among_sql}"
        match = " OR ".join(f'"{t}"' for t in wanted)
        stats_sql = (f"SELECT COUNT(DISTINCT text_hash), AVG(length) FROM events e WHERE tenant = ? AND user_id = ? "
                     f"{status_sql}")
        # the FTS index drives (a join lets SQLite probe it once per row of the user instead: 200× slower)
        rows_sql = f"""SELECT e.event_id, e.text_hash, e.tokens, e.length, {type_ok} FROM events e
                       WHERE e.doc IN (SELECT rowid FROM events_fts WHERE events_fts MATCH ?)
                       AND e.tenant = ? AND e.user_id = ? {status_sql} {serving_sql}"""

        def read(c: sqlite3.Connection) -> tuple[tuple[int, float | None], list[_Matched]]:
            stats = c.execute(stats_sql, (tenant, user_id, *status_args)).fetchone()
            return stats, c.execute(rows_sql, (*type_args, *among_args, match, tenant, user_id, *status_args,
                                               *serving_args)).fetchall()

        (texts, avg_length), rows = self._db.run(read)
        if not rows:
            return []
        return _bm25(wanted, rows, texts, avg_length or 1.0)[:k]

    def vector_search(self, tenant: str, user_id: str, vector: np.ndarray, types: Collection[EventType] | None,
                      k: int, statuses: Collection[str] = SEARCHABLE,
                      purposes: Collection[str] | None = None,
                      among: Collection[str] | None = None) -> list[tuple[str, float]]:
        if not statuses or (purposes is not None and not purposes) or (among is not None and not among):
            return []
        type_sql, args = _type_filter(types)
        status_sql, status_args = _status_filter(statuses)
        serving_sql, serving_args = _purpose_filter(purposes)
        among_sql, among_args = _among_filter(among)
        sql = (f"SELECT event_id, embedding FROM vectors e WHERE tenant = ? AND user_id = ? {status_sql} {type_sql} "
               f"{serving_sql} {among_sql}")
        query = np.asarray(vector, dtype=np.float32)
        ids, sims = self._db.run(lambda c: _cosines(c.execute(sql, (tenant, user_id, *status_args, *args,
                                                                             *serving_args, *among_args)), query))
        best = np.argsort(-sims, kind="stable")[:k]
        return [(ids[i], float(sims[i])) for i in best]

    def get(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        if not event_ids:
            return []
        marks = ",".join("?" * len(event_ids))
        sql = f"SELECT {_COLUMNS} FROM events WHERE tenant = ? AND user_id = ? AND event_id IN ({marks})"
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *event_ids)).fetchall())
        found = {r[0]: _event(r) for r in rows}
        return [found[i] for i in event_ids if i in found]

    def live_count(self, tenant: str, user_id: str) -> int:
        sql = f"SELECT COUNT(*) FROM events WHERE tenant = ? AND user_id = ? AND status = '{LIVE}'"
        count: int = self._db.run(lambda c: c.execute(sql, (tenant, user_id)).fetchone()[0])
        return count

    def dump(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             before_ts: float | None = None, statuses: Collection[str] = (LIVE,),
             limit: int = 10_000) -> list[tuple[StoredEvent, np.ndarray]]:
        type_sql, type_args = _type_filter(types)
        args: list[str | float] = [*type_args]
        if before_ts is not None:
            type_sql += " AND e.ts < ?"
            args.append(before_ts)
        marks = ",".join("?" * len(statuses))
        sql = (f"SELECT {_qualified('e')}, v.embedding FROM events e {_VECTOR_JOIN} WHERE e.tenant = ? "
               f"AND e.user_id = ? AND e.status IN ({marks}) {type_sql} ORDER BY e.ts, e.event_id LIMIT ?")
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *statuses, *args, limit)).fetchall())
        return [(_event(r[:-1]), np.frombuffer(r[-1], dtype=np.float32).copy()) for r in rows]

    def page(self, tenant: str, user_id: str, *, types: Collection[EventType] | None = None,
             statuses: Collection[str] = ALL_STATUSES, message_ids: Collection[str] | None = None,
             session_id: str | None = None, before: tuple[float, str] | None = None,
             limit: int = 50) -> list[StoredEvent]:
        if not statuses or limit <= 0 or (message_ids is not None and not message_ids):
            return []
        status_sql, args = _status_filter(statuses)
        type_sql, type_args = _type_filter(types)
        where, values = [status_sql, type_sql], [*args, *type_args]
        cursor: list[float | str] = []
        if session_id is not None:
            where.append("AND e.session_id = ?")
            values.append(session_id)
        if message_ids is not None:
            wanted = sorted(set(message_ids))
            where.append(f"AND ({' OR '.join('instr(e.message_ids, ?) > 0' for _ in wanted)})")
            values += [json.dumps(m) for m in wanted]  # ids are JSON strings in the stored list
        if before is not None:
            where.append("AND (e.ts < ? OR (e.ts = ? AND e.event_id < ?))")
            cursor = [before[0], before[0], before[1]]
        sql = (f"SELECT {_qualified('e')} FROM events e WHERE e.tenant = ? AND e.user_id = ? {' '.join(where)} "
               "ORDER BY e.ts DESC, e.event_id DESC LIMIT ?")
        rows = self._db.run(lambda c: c.execute(sql, (tenant, user_id, *values, *cursor, limit)).fetchall())
        events = [_event(r) for r in rows]
        if message_ids is not None:  # instr also matches an id inside a longer one's JSON string: exact only
            events = [e for e in events if set(e.message_ids) & set(message_ids)]
        return events

    def delete(self, tenant: str, user_id: str, event_ids: Sequence[str]) -> int:
        if not event_ids:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            marks = ",".join("?" * len(event_ids))
            where = f"tenant = ? AND user_id = ? AND event_id IN ({marks})"
            args = (tenant, user_id, *event_ids)
            absorbed = (f"tenant = ? AND user_id = ? AND canonical_id IN "
                        f"(SELECT event_id FROM events WHERE {where})")
            removed = 0
            for condition, values in ((absorbed, (tenant, user_id, *args)), (where, args)):
                conn.execute(f"DELETE FROM events_fts WHERE rowid IN (SELECT doc FROM events WHERE {condition})",
                             values)
                conn.execute(f"DELETE FROM vectors WHERE tenant = ? AND user_id = ? AND event_id IN "
                             f"(SELECT event_id FROM events WHERE {condition})", (tenant, user_id, *values))
                removed += conn.execute(f"DELETE FROM events WHERE {condition}", values).rowcount
            return removed

        removed = self._db.transaction(run)
        self._db.checkpoint()
        return removed

    def retract(self, tenant: str, user_id: str, messages: Messages) -> int:
        if not messages:
            return 0
        user, message_ids = (tenant, user_id), messages.ids()

        def run(conn: sqlite3.Connection) -> int:
            holding = " OR ".join("instr(message_ids, ?) > 0" for _ in message_ids)  # ids are JSON strings
            touched = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE tenant = ? AND user_id = ? AND ({holding})",
                                   (*user, *(json.dumps(m) for m in message_ids))).fetchall()
            heads = sorted({r[_FIELDS.index("canonical_id")] or r[0] for r in touched})
            if not heads:
                return 0
            marks = ",".join("?" * len(heads))
            rows = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE tenant = ? AND user_id = ? AND "
                                f"(event_id IN ({marks}) OR canonical_id IN ({marks}) OR {holding})",
                                (*user, *heads, *heads, *(json.dumps(m) for m in message_ids))).fetchall()
            plan = plan_retraction([_event(r) for r in rows], messages)
            for event_id in plan.removed:
                conn.execute(f"DELETE FROM events_fts WHERE rowid = (SELECT doc FROM events WHERE {_ONE})",
                             (*user, event_id))
                conn.execute(f"DELETE FROM vectors WHERE {_ONE}", (*user, event_id))
                conn.execute(f"DELETE FROM events WHERE {_ONE}", (*user, event_id))
            now = time.time()
            for event_id, fields in plan.updates.items():
                values = {k: json.dumps(v) if k == "message_ids" else v for k, v in fields.items()}
                sets = ", ".join(f"{name} = ?" for name in values)
                conn.execute(f"UPDATE events SET {sets}, updated_at = ? WHERE {_ONE}",
                             (*values.values(), now, *user, event_id))
                if "status" in fields:
                    _set_status(conn, tenant, user_id, [event_id], fields["status"])
            return len(plan.removed)

        removed = self._db.transaction(run)
        if removed:
            self._db.checkpoint()
        return removed

    def strip_content(self, tenant: str, user_id: str, sealed: Callable[[str], bytes], lang: str) -> int:
        user = (tenant, user_id)

        def run(conn: sqlite3.Connection) -> int:
            rows = conn.execute("SELECT event_id, doc FROM events WHERE tenant = ? AND user_id = ?", user).fetchall()
            now = time.time()
            conn.executemany(f"UPDATE events SET sealed = ?, lang = ?, tokens = '', length = 0, updated_at = ? "
                             f"WHERE {_ONE}", [(sealed(event_id), lang, now, *user, event_id) for event_id, _ in rows])
            conn.executemany("UPDATE events_fts SET tokens = '' WHERE rowid = ?", [(doc,) for _, doc in rows])
            conn.execute("UPDATE vectors SET embedding = zeroblob(length(embedding)) WHERE tenant = ? AND user_id = ?",
                         user)  # float32 zeros: a child's vector
            return len(rows)

        stripped = self._db.transaction(run)
        if stripped:
            self._db.checkpoint()  # no copy of the old pages stays in the write-ahead log
        return stripped

    def update(self, tenant: str, user_id: str, event_ids: Sequence[str], **fields: float | str) -> int:
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

        def write(conn: sqlite3.Connection) -> int:
            if "status" in fields:
                _set_status(conn, tenant, user_id, event_ids, str(fields["status"]))
            return conn.execute(sql, args).rowcount

        return self._db.transaction(write)

    def users(self, after: tuple[str, str] = ("", ""), limit: int = 1000) -> list[tuple[str, str]]:
        sql = ("SELECT DISTINCT tenant, user_id FROM events WHERE (tenant, user_id) > (?, ?) "
               "ORDER BY tenant, user_id LIMIT ?")
        return [tuple(r) for r in self._db.run(lambda c: c.execute(sql, (*after, limit)).fetchall())]

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())


_TYPES, _ROLES = {t.value: t for t in EventType}, {r.value: r for r in Role}


@dataclass(frozen=True, slots=True)
class _Live:
    """What the cap weighs of a live row (``memory.episodic.Standing``), read without the rest of it: a user at
    the cap has every live row read for each batch that adds to it (parsed into whole ``StoredEvent``s, they
    were about half of what an event added at the cap cost)."""

    event_id: str
    event_type: EventType
    role: Role
    purposes: list[str]
    ts: float
    confidence: float
    weight: float
    noise: float
    count: int

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, ...]]) -> list[_Live]:
        """Rows of these fields, in this order (anything after them ignored)."""
        parsed = {text: json.loads(text) for text in {r[3] for r in rows}}  # a user's rows share a few lists
        return [cls(r[0], _TYPES[r[1]], _ROLES[r[2]], parsed[r[3]], r[4], r[5], r[6], r[7], r[8]) for r in rows]


_LIVE_FIELDS = tuple(f.name for f in dataclasses.fields(_Live))
_Kind = tuple[str, str, EventType, str, str]  # tenant, user, type, role, purposes: what may merge with what
_Candidates = tuple[list[str], list[np.ndarray]]  # the live events of a kind, their vectors in blocks of rows


def _kind(event: StoredEvent) -> _Kind:
    return event.tenant, event.user_id, event.event_type, event.role.value, _purposes(event.purposes)


def _add_one(conn: sqlite3.Connection, event: StoredEvent, kind: _Kind, vector: np.ndarray, threshold: float,
             report: AddReport, candidates: dict[_Kind, _Candidates]) -> None:
    """Insert the event, or merge it into the live event of its kind nearest to it (at ``threshold`` or more).
    ``candidates``: each kind's live events as this batch has read and grown them."""
    if conn.execute("SELECT 1 FROM events WHERE tenant = ? AND user_id = ? AND event_id = ?",
                    (event.tenant, event.user_id, event.event_id)).fetchone():
        report.known.append(event.event_id)
        return
    if kind not in candidates:
        ids, matrix = _merge_candidates(conn, kind)
        candidates[kind] = (ids, [matrix] if ids else [])
    ids, blocks = candidates[kind]
    if ids:
        sims = np.concatenate([block @ vector for block in blocks])
        best = int(np.argmax(sims))
        if sims[best] >= threshold:
            _insert(conn, event.model_copy(update={"status": MERGED, "canonical_id": ids[best]}), vector)
            _absorb(conn, event.tenant, event.user_id, ids[best], event.count, event.confidence,
                    event.message_ids, event.ts)
            report.merged[event.event_id] = ids[best]
            return
    _insert(conn, event.model_copy(update={"status": LIVE, "canonical_id": None}), vector)
    ids.append(event.event_id)  # a later event of the batch may merge into this one
    blocks.append(vector[None, :])
    report.inserted.append(event.event_id)


def _insert(conn: sqlite3.Connection, event: StoredEvent, vector: np.ndarray) -> None:
    values = [getattr(event, f) for f in _FIELDS]
    values[_FIELDS.index("event_type")] = event.event_type.value
    values[_FIELDS.index("role")] = event.role.value
    values[_FIELDS.index("message_ids")] = json.dumps(event.message_ids)
    values[_FIELDS.index("purposes")] = _purposes(event.purposes)
    doc = _next_doc(conn)
    conn.execute(f"INSERT INTO events (doc, {_COLUMNS}, tokens, length, updated_at) "
                 f"VALUES ({','.join('?' * (len(_FIELDS) + 4))})",
                 (doc, *values, " ".join(event.tokens), len(event.tokens), time.time()))
    conn.execute("INSERT INTO events_fts (rowid, tokens) VALUES (?, ?)", (doc, " ".join(event.tokens)))
    conn.execute(f"INSERT INTO vectors ({_VECTOR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (event.tenant, event.user_id, event.event_id, event.status, event.event_type.value,
                  event.role.value, vector.tobytes(), values[_FIELDS.index("purposes")]))


def _next_doc(conn: sqlite3.Connection) -> int:
    """The next row's number in the full-text index (rows are stored by user, the index needs integers)."""
    doc: int = conn.execute("SELECT COALESCE(MAX(doc), 0) + 1 FROM events").fetchone()[0]
    return doc


def _absorb(conn: sqlite3.Connection, tenant: str, user_id: str, target: str, count: int, confidence: float,
            message_ids: list[str], ts: float) -> None:
    row = conn.execute("SELECT confidence, message_ids FROM events WHERE tenant = ? AND user_id = ? AND event_id = ?",
                       (tenant, user_id, target)).fetchone()
    united = list(dict.fromkeys(json.loads(row[1]) + message_ids))
    conn.execute("UPDATE events SET count = count + ?, confidence = ?, message_ids = ?, ts = MAX(ts, ?), "
                 "updated_at = ? WHERE tenant = ? AND user_id = ? AND event_id = ?",
                 (count, merged_confidence(row[0], confidence), json.dumps(united), ts, time.time(), tenant, user_id,
                  target))


def _enforce_cap(conn: sqlite3.Connection, tenant: str, user_id: str, cap: int, threshold: float,
                 report: AddReport) -> None:
    live = conn.execute(f"SELECT COUNT(*) FROM events WHERE tenant = ? AND user_id = ? AND status = '{LIVE}'",
                        (tenant, user_id)).fetchone()[0]
    if live <= cap:
        return
    rows = conn.execute(f"SELECT {_qualified('e', _LIVE_FIELDS)}, v.embedding FROM events e INDEXED BY "
                        f"events_by_user {_VECTOR_JOIN} "
                        f"WHERE e.tenant = ? AND e.user_id = ? AND e.status = '{LIVE}' ORDER BY e.doc",
                        (tenant, user_id)).fetchall()
    events = _Live.of(rows)
    vectors = _stacked([r[-1] for r in rows])
    by_id = {e.event_id: e for e in events}
    now, user = time.time(), (tenant, user_id)
    for event_id, into in plan_overflow(events, vectors, cap, threshold, now):
        gone = by_id[event_id]
        if into is None:
            conn.execute(f"UPDATE events SET status = ?, updated_at = ? WHERE {_ONE}", (EVICTED, now, *user, event_id))
            _set_status(conn, tenant, user_id, [event_id], EVICTED)
            report.evicted.append(Evicted(tenant=tenant, user_id=user_id, event_id=event_id,
                                          event_type=gone.event_type))
            continue
        current = conn.execute(f"SELECT count, confidence, message_ids, ts FROM events WHERE {_ONE}",
                               (*user, event_id)).fetchone()
        _absorb(conn, *user, into, current[0], current[1], json.loads(current[2]), current[3])
        conn.execute("UPDATE events SET canonical_id = ? WHERE canonical_id = ?", (into, event_id))
        conn.execute(f"UPDATE events SET status = ?, canonical_id = ?, updated_at = ? WHERE {_ONE}",
                     (MERGED, into, now, *user, event_id))
        _set_status(conn, tenant, user_id, [event_id], MERGED)
        report.consolidated.append(Consolidated(tenant=tenant, user_id=user_id, event_id=event_id, into=into))


def _cosines(cursor: sqlite3.Cursor, query: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Each row's id and cosine to ``query``, its vectors read ``SEARCH_CHUNK`` rows at a time: a long-term
    user's thousands of rows never sit in memory at once (read whole, 20,000 rows were 40 MB of bytes objects
    joined into a 40 MB array, and making the two was most of the search's time)."""
    ids: list[str] = []
    sims = []
    while rows := cursor.fetchmany(SEARCH_CHUNK):
        chunk_ids, matrix = _matrix(rows)
        ids += chunk_ids
        sims.append(matrix @ query)
    return ids, np.concatenate(sims) if sims else np.zeros(0, dtype=np.float32)


def _merge_candidates(conn: sqlite3.Connection, kind: _Kind) -> tuple[list[str], np.ndarray]:
    """The live events an event of this kind may merge with (one user, type and role, recorded under the same
    purposes), and their vectors: read through the live rows' index, not the user's whole history."""
    tenant, user_id, event_type, role, recorded = kind
    return _matrix(conn.execute(f"SELECT event_id, embedding FROM vectors INDEXED BY vectors_by_status WHERE "
                                f"tenant = ? AND user_id = ? AND status = '{LIVE}' AND event_type = ? AND role = ? "
                                f"AND purposes = ?", (tenant, user_id, event_type.value, role, recorded)).fetchall())


def _matrix(rows: list[tuple[str, bytes]]) -> tuple[list[str], np.ndarray]:
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    return [r[0] for r in rows], _stacked([r[1] for r in rows])


def _stacked(blobs: list[bytes]) -> np.ndarray:
    """Stored float32 vectors as the rows of one matrix."""
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)


def _bm25(wanted: list[str], rows: list[_Matched], texts: int, avg_length: float) -> list[tuple[str, float]]:
    """Per-user BM25 over the matched rows, normalised by the query's total term weight. A text stored
    under several event types counts once in the statistics."""
    holding: dict[str, set[str]] = {t: set() for t in wanted}
    parsed = []
    for event_id, text_hash, tokens, length, type_ok in rows:
        tf = Counter(tokens.split())
        for t in wanted:
            if t in tf:
                holding[t].add(text_hash)
        if type_ok:
            parsed.append((event_id, tf, length))
    n = max(texts, 1)
    idf = {t: math.log(1 + (n - len(h) + 0.5) / (len(h) + 0.5)) for t, h in holding.items()}
    total = sum(idf.values()) or 1.0
    scored = []
    for event_id, tf, length in parsed:
        norm = K1 * (1 - B + B * length / avg_length)
        score = sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + norm) for t in wanted if t in tf)
        scored.append((event_id, score / total))
    scored.sort(key=lambda es: (-es[1], es[0]))
    return scored


def _set_status(conn: sqlite3.Connection, tenant: str, user_id: str, event_ids: Sequence[str], status: str) -> None:
    marks = ",".join("?" * len(event_ids))
    conn.execute(f"UPDATE vectors SET status = ? WHERE tenant = ? AND user_id = ? AND event_id IN ({marks})",
                 (status, tenant, user_id, *event_ids))


def _qualified(alias: str, fields: Sequence[str] = _FIELDS) -> str:
    return ", ".join(f"{alias}.{f}" for f in fields)


def _status_filter(statuses: Collection[str]) -> tuple[str, list[str]]:
    values = sorted(set(statuses))
    return f"AND e.status IN ({','.join('?' * len(values))})", values


def _purposes(recorded: Sequence[str]) -> str:
    """How a row's purposes are stored: a JSON list, sorted, so that equal sets are equal strings."""
    return json.dumps(sorted(set(recorded)))


def _purpose_filter(serving: Collection[str] | None) -> tuple[str, list[str]]:
    """Rows recorded under one of the ``serving`` tokens (a token is a JSON string inside the stored list)."""
    if serving is None:
        return "", []
    tokens = sorted(set(serving))
    return f"AND ({' OR '.join('instr(e.purposes, ?) > 0' for _ in tokens)})", [json.dumps(t) for t in tokens]


def _among_filter(among: Collection[str] | None) -> tuple[str, list[str]]:
    """Only the rows named (a search scoring given candidates on one more signal)."""
    if among is None:
        return "", []
    values = sorted(set(among))
    return f"AND e.event_id IN ({','.join('?' * len(values))})", values


def _type_filter(types: Collection[EventType] | None) -> tuple[str, list[str]]:
    if not types:
        return "", []
    values = sorted(EventType(t).value for t in types)
    return f"AND e.event_type IN ({','.join('?' * len(values))})", values


def _event(row: tuple[Any, ...]) -> StoredEvent:
    fields = dict(zip(_FIELDS, row, strict=True))
    fields["message_ids"] = json.loads(fields["message_ids"])
    fields["purposes"] = json.loads(fields["purposes"])
    return StoredEvent(**fields)
