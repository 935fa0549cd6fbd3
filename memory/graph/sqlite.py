"""Embedded graph store on one SQLite file. Each piece of evidence is merged in one transaction:
the evidence row (its primary key makes redelivery a no-op) and the confidence merge statement."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from memory import ids
from memory.graph import COUNTER, MAX_CONFIDENCE, MIN_CONFIDENCE, NEW_WEIGHT, OLD_WEIGHT, Change, StoredFact
from memory.models import SINGLE_VALUED, Fact, FactSource
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
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS relations_by_user ON relations (tenant, user_id, relation);
CREATE TABLE IF NOT EXISTS evidence (
    rel_id TEXT NOT NULL,
    evidence_id TEXT NOT NULL,
    source TEXT NOT NULL,
    confidence REAL NOT NULL,
    message_ids TEXT NOT NULL,
    ts REAL NOT NULL,
    before REAL,
    after REAL,
    PRIMARY KEY (rel_id, evidence_id)
);
"""

_MERGE = f"""
INSERT INTO relations (rel_id, tenant, user_id, relation, concept_id, object, confidence, source,
                       created_at, updated_at)
VALUES (:rel_id, :tenant, :user_id, :relation, :concept_id, :object,
        MIN({MAX_CONFIDENCE}, MAX({MIN_CONFIDENCE}, :confidence)), :source, :now, :now)
ON CONFLICT (rel_id) DO UPDATE SET
    confidence = MIN({MAX_CONFIDENCE}, MAX({MIN_CONFIDENCE},
                     {OLD_WEIGHT} * relations.confidence + {NEW_WEIGHT} * excluded.confidence)),
    source = excluded.source,
    updated_at = excluded.updated_at
"""

_COUNTER = f"""
UPDATE relations SET confidence = MAX({MIN_CONFIDENCE}, confidence * {COUNTER}),
                     source = '{FactSource.counter_evidence.value}', updated_at = :now
WHERE rel_id = :rel_id
"""

_FACTS = """
SELECT r.rel_id, r.user_id, r.relation, r.object, r.concept_id, r.confidence, r.source, r.created_at,
       r.updated_at, COUNT(e.evidence_id),
       (SELECT json_group_array(DISTINCT m.value) FROM evidence e2, json_each(e2.message_ids) m
        WHERE e2.rel_id = r.rel_id),
       json_group_array(e.evidence_id)
FROM relations r LEFT JOIN evidence e ON e.rel_id = r.rel_id AND e.source != 'counter_evidence'
WHERE r.tenant = ? AND r.user_id = ?
GROUP BY r.rel_id
ORDER BY r.confidence DESC, r.updated_at DESC
LIMIT ?
"""


class SQLiteGraphStore:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteFile(path, _SCHEMA, "graph store")

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteGraphStore:
        return cls(sqlite_path(url))

    def apply(self, facts: Sequence[Fact]) -> list[Change]:
        changes: dict[tuple[str, str, str], Change] = {}
        for fact in facts:
            for change in self._db.transaction(lambda conn, f=fact: _apply(conn, f)):
                changes[(change.rel_id, change.evidence_id, change.source)] = change
        return list(changes.values())

    def facts(self, tenant: str, user_id: str, limit: int) -> list[StoredFact]:
        rows = self._db.run(lambda c: c.execute(_FACTS, (tenant, user_id, limit)).fetchall())
        return [
            StoredFact(
                rel_id=r[0], subject=r[1], relation=r[2], object=r[3], concept_id=r[4], confidence=r[5],
                source=r[6], created_at=r[7], updated_at=r[8], evidence_count=r[9],
                message_ids=json.loads(r[10] or "[]"), event_ids=[e for e in json.loads(r[11]) if e],
            )
            for r in rows
        ]

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())


def _apply(conn: sqlite3.Connection, fact: Fact) -> list[Change]:
    now = time.time()
    concept = ids.concept_id(fact.tenant, fact.object)
    rel_id = ids.relation_id(fact.tenant, fact.user_id, fact.relation.value, concept)
    if _add_evidence(conn, rel_id, fact, fact.source, fact.confidence):
        user_node = ids.user_node_id(fact.tenant, fact.user_id)
        conn.executemany(
            "INSERT OR IGNORE INTO nodes VALUES (?, ?, ?, ?, ?)",
            [(user_node, "user", fact.tenant, fact.user_id, now),
             (concept, "concept", fact.tenant, fact.object, now)],
        )
        before = _confidence(conn, rel_id)
        conn.execute(_MERGE, {
            "rel_id": rel_id, "tenant": fact.tenant, "user_id": fact.user_id, "relation": fact.relation.value,
            "concept_id": concept, "object": fact.object, "confidence": fact.confidence,
            "source": fact.source.value, "now": now,
        })
        _record(conn, rel_id, fact.evidence_id, before)
        if fact.relation in SINGLE_VALUED:  # a new age/name/grade is counter-evidence for the others
            rivals = conn.execute(
                "SELECT rel_id FROM relations WHERE tenant = ? AND user_id = ? AND relation = ? AND rel_id != ?",
                (fact.tenant, fact.user_id, fact.relation.value, rel_id),
            ).fetchall()
            for (rival,) in rivals:
                if _add_evidence(conn, rival, fact, FactSource.counter_evidence, COUNTER):
                    before = _confidence(conn, rival)
                    conn.execute(_COUNTER, {"rel_id": rival, "now": now})
                    _record(conn, rival, fact.evidence_id, before)
    # What this evidence did, whether merged now or by an earlier delivery: the audit trail is
    # re-sent on redelivery with the same record ids, so a lost audit message is never lost for good.
    rows = conn.execute(
        "SELECT e.rel_id, r.relation, r.object, e.source, e.before, e.after FROM evidence e "
        "JOIN relations r ON r.rel_id = e.rel_id WHERE e.evidence_id = ? AND r.tenant = ? AND r.user_id = ? "
        "AND (e.rel_id = ? OR e.source = ?)",
        (fact.evidence_id, fact.tenant, fact.user_id, rel_id, FactSource.counter_evidence.value),
    ).fetchall()
    return [
        Change(tenant=fact.tenant, user_id=fact.user_id, rel_id=r[0], relation=r[1], object=r[2], source=r[3],
               evidence_id=fact.evidence_id, before=r[4], after=r[5])
        for r in rows
    ]


def _add_evidence(conn: sqlite3.Connection, rel_id: str, fact: Fact, source: FactSource, conf: float) -> bool:
    """False when this evidence was merged into this relation before."""
    return bool(conn.execute(
        "INSERT OR IGNORE INTO evidence (rel_id, evidence_id, source, confidence, message_ids, ts) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (rel_id, fact.evidence_id, source.value, conf, json.dumps(fact.message_ids), fact.ts),
    ).rowcount)


def _record(conn: sqlite3.Connection, rel_id: str, evidence_id: str, before: float | None) -> None:
    conn.execute(
        "UPDATE evidence SET before = ?, after = (SELECT confidence FROM relations WHERE rel_id = ?) "
        "WHERE rel_id = ? AND evidence_id = ?", (before, rel_id, rel_id, evidence_id),
    )


def _confidence(conn: sqlite3.Connection, rel_id: str) -> float | None:
    row = conn.execute("SELECT confidence FROM relations WHERE rel_id = ?", (rel_id,)).fetchone()
    return row[0] if row else None
