"""Embedded graph store on one SQLite file. Every primitive is one transaction; a merge is one upsert
statement whose formula runs in the database, next to the evidence row that makes it happen once."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memory import ids
from memory.graph import (
    MAX_CONFIDENCE,
    MIN_CONFIDENCE,
    NEW_WEIGHT,
    OLD_WEIGHT,
    STATUS_ACTIONS,
    Change,
    Evidence,
    EvidenceRow,
    MergeMode,
    RelationKey,
    Status,
    StoredRelation,
)
from memory.models import FactSource
from memory.settings import Settings
from memory.sqlite import SQLiteFile, sqlite_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    node_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'concept')),
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS relations (
    rel_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    relation TEXT NOT NULL,
    concept_id TEXT NOT NULL REFERENCES nodes (node_id),
    object TEXT NOT NULL,
    confidence REAL NOT NULL CHECK (confidence BETWEEN 0.1 AND 1.0),
    source TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    base_ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS relations_by_user ON relations (tenant, user_id, relation);
CREATE TABLE IF NOT EXISTS evidence (
    rel_id TEXT NOT NULL,
    evidence_id TEXT NOT NULL,
    source TEXT NOT NULL,
    confidence REAL NOT NULL,
    message_ids TEXT NOT NULL,
    device_id TEXT,
    session_id TEXT,
    ts REAL NOT NULL,
    note TEXT NOT NULL,
    action TEXT NOT NULL,
    before REAL,
    after REAL,
    applied_at REAL NOT NULL,
    purposes TEXT NOT NULL DEFAULT '["*"]',
    PRIMARY KEY (rel_id, evidence_id)
);
"""
#: A file written before purposes were recorded gains the column (its evidence: ``memory.purposes.ANY``).
_ADDED = (("evidence", "purposes", """TEXT NOT NULL DEFAULT '["*"]'"""),)

_CLAMP = f"MIN({MAX_CONFIDENCE}, MAX({MIN_CONFIDENCE}, {{}}))"

# One statement: insert, or merge by mode — unless a human owns the belief and this is rule/LLM evidence.
_MERGE = f"""
INSERT INTO relations (rel_id, tenant, user_id, relation, concept_id, object, confidence, source, status,
                       created_at, updated_at, base_ts)
VALUES (:rel_id, :tenant, :user_id, :relation, :concept_id, :object, {_CLAMP.format(':confidence')}, :source,
        COALESCE(:status, 'active'), :now, :now, :now)
ON CONFLICT (rel_id) DO UPDATE SET
    confidence = CASE :mode
        WHEN 'blend' THEN {_CLAMP.format(f'{OLD_WEIGHT} * relations.confidence + {NEW_WEIGHT} * excluded.confidence')}
        WHEN 'max' THEN {_CLAMP.format('MAX(relations.confidence, excluded.confidence)')}
        ELSE excluded.confidence END,
    source = excluded.source,
    status = CASE WHEN :status IS NOT NULL THEN :status
                  WHEN relations.status = 'retired' THEN 'active' ELSE relations.status END,
    updated_at = MAX(excluded.updated_at, relations.updated_at + 0.000001),
    base_ts = excluded.base_ts
WHERE NOT (relations.source = 'human' AND excluded.source IN ('rule', 'llm'))
"""

_REL_COLUMNS = ("rel_id, tenant, user_id, relation, concept_id, object, confidence, source, status, created_at, "
                "updated_at, base_ts")
_EV_COLUMNS = ("rel_id, evidence_id, source, confidence, message_ids, device_id, session_id, ts, note, action, "
               "before, after, applied_at, purposes")


class SQLiteGraphStore:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteFile(path, _SCHEMA, "graph store", added=_ADDED)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteGraphStore:
        return cls(sqlite_path(url))

    def merge(self, key: RelationKey, evidence: Evidence, mode: MergeMode,
              status: Status | None = None) -> Change:
        rel_id = ids.relation_id(key.tenant, key.user_id, key.relation, key.concept_id)
        status = Status.active if mode is MergeMode.human else status

        def run(conn: sqlite3.Connection) -> Change:
            recorded = _recorded(conn, rel_id, evidence.evidence_id)
            if recorded:
                return recorded
            now = time.time()
            conn.executemany("INSERT OR IGNORE INTO nodes VALUES (?, ?, ?, ?, ?)", [
                (ids.user_node_id(key.tenant, key.user_id), "user", key.tenant, key.user_id, now),
                (key.concept_id, "concept", key.tenant, key.object, now),
            ])
            before = _confidence(conn, rel_id)
            changed = conn.execute(_MERGE, {
                "rel_id": rel_id, "tenant": key.tenant, "user_id": key.user_id, "relation": key.relation,
                "concept_id": key.concept_id, "object": key.object, "confidence": evidence.confidence,
                "source": FactSource.human.value if mode is MergeMode.human else evidence.source.value,
                "mode": mode.value, "status": status.value if status else None, "now": now,
            }).rowcount
            action = f"merge:{mode.value}" if changed else "ignored"
            return _record(conn, rel_id, evidence, action, before, now)

        return self._db.transaction(run)

    def scale(self, rel_id: str, evidence: Evidence, factor: float) -> Change | None:
        def run(conn: sqlite3.Connection) -> Change | None:
            recorded = _recorded(conn, rel_id, evidence.evidence_id)
            if recorded:
                return recorded
            row = conn.execute("SELECT confidence, source FROM relations WHERE rel_id = ? AND status = 'active'",
                               (rel_id,)).fetchone()
            if row is None:
                return None
            now = time.time()
            if row[1] == FactSource.human.value:  # a human's word outweighs counter-evidence from rules
                return _record(conn, rel_id, evidence, "ignored", row[0], now)
            conn.execute(f"UPDATE relations SET confidence = {_CLAMP.format('confidence * ?')}, source = ?, "
                         "updated_at = MAX(?, updated_at + 0.000001) WHERE rel_id = ?",
                         (factor, FactSource.counter_evidence.value, now, rel_id))
            return _record(conn, rel_id, evidence, "counter", row[0], now)

        return self._db.transaction(run)

    def set_status(self, rel_id: str, status: Status, evidence: Evidence) -> Change | None:
        def apply(conn: sqlite3.Connection, now: float) -> str:
            source_sql = ", source = 'human'" if status is Status.deleted else ""
            conn.execute(f"UPDATE relations SET status = ?, updated_at = MAX(?, updated_at + 0.000001){source_sql} "
                         "WHERE rel_id = ?", (status.value, now, rel_id))
            return STATUS_ACTIONS[status]

        return self._once(rel_id, evidence, apply)

    def rescore(self, rel_id: str, confidence: float, evidence: Evidence) -> Change | None:
        def apply(conn: sqlite3.Connection, now: float) -> str:
            conn.execute(f"UPDATE relations SET confidence = {_CLAMP.format('?')}, base_ts = ?, "
                         "updated_at = MAX(?, updated_at + 0.000001) WHERE rel_id = ?", (confidence, now, now, rel_id))
            return "rescore"

        return self._once(rel_id, evidence, apply)

    def _once(self, rel_id: str, evidence: Evidence, apply: Callable[[sqlite3.Connection, float], str]
              ) -> Change | None:
        """``apply`` the change to an existing relation and record it with ``evidence``, once per evidence id."""
        def run(conn: sqlite3.Connection) -> Change | None:
            recorded = _recorded(conn, rel_id, evidence.evidence_id)
            if recorded:
                return recorded
            before = _confidence(conn, rel_id)
            if before is None:
                return None
            now = time.time()
            return _record(conn, rel_id, evidence, apply(conn, now), before, now)

        return self._db.transaction(run)

    def materialise(self, rel_id: str, confidence: float, base_ts: float, seen_updated_at: float) -> bool:
        return bool(self._db.run(lambda c: c.execute(
            f"UPDATE relations SET confidence = {_CLAMP.format('?')}, base_ts = ? "
            "WHERE rel_id = ? AND updated_at = ? AND status = 'active'",
            (confidence, base_ts, rel_id, seen_updated_at)).rowcount))

    def relations(self, tenant: str, user_id: str, relation: str | None = None,
                  statuses: Sequence[Status] = (Status.active,)) -> list[StoredRelation]:
        marks = ",".join("?" * len(statuses))
        sql = (f"SELECT {_REL_COLUMNS} FROM relations WHERE tenant = ? AND user_id = ? AND status IN ({marks})"
               + (" AND relation = ?" if relation else "") + " ORDER BY confidence DESC, updated_at DESC")
        args = [tenant, user_id, *(s.value for s in statuses)] + ([relation] if relation else [])
        return [_relation(r) for r in self._db.run(lambda c: c.execute(sql, args).fetchall())]

    def active_count(self) -> int:
        count: int = self._db.run(lambda c: c.execute("SELECT COUNT(*) FROM relations WHERE status = 'active'")
                                  .fetchone()[0])
        return count

    def scan(self, after_rel_id: str, limit: int) -> list[StoredRelation]:
        sql = f"SELECT {_REL_COLUMNS} FROM relations WHERE status = 'active' AND rel_id > ? ORDER BY rel_id LIMIT ?"
        return [_relation(r) for r in self._db.run(lambda c: c.execute(sql, (after_rel_id, limit)).fetchall())]

    def evidence(self, rel_ids: Sequence[str]) -> list[EvidenceRow]:
        if not rel_ids:
            return []
        sql = (f"SELECT {_EV_COLUMNS} FROM evidence WHERE rel_id IN ({','.join('?' * len(rel_ids))}) "
               "ORDER BY applied_at, rowid")
        return [_evidence(r) for r in self._db.run(lambda c: c.execute(sql, list(rel_ids)).fetchall())]

    def erase_user(self, tenant: str, user_id: str) -> int:
        def run(conn: sqlite3.Connection) -> int:
            mine = "SELECT rel_id FROM relations WHERE tenant = ? AND user_id = ?"
            conn.execute(f"DELETE FROM evidence WHERE rel_id IN ({mine})", (tenant, user_id))
            gone = conn.execute("DELETE FROM relations WHERE tenant = ? AND user_id = ?", (tenant, user_id)).rowcount
            conn.execute("DELETE FROM nodes WHERE kind = 'concept' AND tenant = ? "
                         "AND node_id NOT IN (SELECT concept_id FROM relations WHERE tenant = ?)", (tenant, tenant))
            conn.execute("UPDATE nodes SET name = '' WHERE node_id = ?", (ids.user_node_id(tenant, user_id),))
            return gone

        gone = self._db.transaction(run)
        self._db.checkpoint()
        return gone

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())


def _confidence(conn: sqlite3.Connection, rel_id: str) -> float | None:
    row = conn.execute("SELECT confidence FROM relations WHERE rel_id = ?", (rel_id,)).fetchone()
    return row[0] if row else None


def _record(conn: sqlite3.Connection, rel_id: str, ev: Evidence, action: str, before: float | None,
            now: float) -> Change:
    after = _confidence(conn, rel_id)
    conn.execute(f"INSERT INTO evidence ({_EV_COLUMNS}) VALUES ({','.join('?' * 14)})",
                 (rel_id, ev.evidence_id, ev.source.value, ev.confidence, json.dumps(ev.message_ids), ev.device_id,
                  ev.session_id, ev.ts, ev.note, action, before, after, now, json.dumps(sorted(set(ev.purposes)))))
    change = _recorded(conn, rel_id, ev.evidence_id)
    if change is None:  # cannot happen: the evidence row is written just now, on a relation that exists
        raise RuntimeError(f"evidence {ev.evidence_id!r} on {rel_id} was not recorded")
    return change


def _recorded(conn: sqlite3.Connection, rel_id: str, evidence_id: str) -> Change | None:
    row = conn.execute(
        "SELECT r.tenant, r.user_id, r.relation, r.object, e.source, e.action, e.before, e.after "
        "FROM evidence e JOIN relations r ON r.rel_id = e.rel_id WHERE e.rel_id = ? AND e.evidence_id = ?",
        (rel_id, evidence_id)).fetchone()
    if row is None:
        return None
    return Change(tenant=row[0], user_id=row[1], rel_id=rel_id, relation=row[2], object=row[3], source=row[4],
                  evidence_id=evidence_id, action=row[5], before=row[6], after=row[7])


def _relation(row: tuple[Any, ...]) -> StoredRelation:
    return StoredRelation(**dict(zip([c.strip() for c in _REL_COLUMNS.split(",")], row, strict=True)))


def _evidence(row: tuple[Any, ...]) -> EvidenceRow:
    fields = dict(zip([c.strip() for c in _EV_COLUMNS.split(",")], row, strict=True))
    fields["message_ids"] = json.loads(fields["message_ids"])
    fields["purposes"] = json.loads(fields["purposes"])
    return EvidenceRow(**fields)
