"""The embedded read log: one SQLite file, a row per read record, keyed by tenant and user hash. An erasure
leaves the time it ran (beside the user hash only), so a read record still on its way then is dropped
when it arrives instead of outliving the erasure."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from memory.settings import Settings
from memory.sqlite import SQLiteFile, sqlite_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reads (
    tenant TEXT NOT NULL,
    user TEXT NOT NULL,
    ts REAL NOT NULL,
    id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant, user, ts, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS reads_id ON reads (id);
CREATE TABLE IF NOT EXISTS erased (
    tenant TEXT NOT NULL,
    user TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (tenant, user)
) WITHOUT ROWID;
"""
# a record of a read made before the user's erasure, written after it (it was in flight), is not kept
_ADD = ("INSERT OR IGNORE INTO reads SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS "
        "(SELECT 1 FROM erased WHERE tenant = ? AND user = ? AND at >= ?)")


class SQLiteReadLog:
    def __init__(self, db: SQLiteFile) -> None:
        self._db = db

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteReadLog:
        return cls(SQLiteFile(sqlite_path(url), _SCHEMA, "read log"))

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        rows = [(r["tenant"], r["user"], r["ts"], r["id"], json.dumps(r, ensure_ascii=False), r["tenant"], r["user"],
                 r["ts"]) for r in records]
        if rows:
            self._db.transaction(lambda c: c.executemany(_ADD, rows))

    def of_user(self, tenant: str, user: str, limit: int, before: float | None = None) -> list[dict[str, Any]]:
        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute("SELECT record FROM reads WHERE tenant = ? AND user = ? AND ts < ? "
                                "ORDER BY ts DESC, id DESC LIMIT ?",
                                (tenant, user, float("inf") if before is None else before, limit)).fetchall()
            return [json.loads(row[0]) for row in rows]

        return self._db.run(read)

    def count(self, tenant: str, user: str) -> int:
        row = self._db.run(lambda c: c.execute("SELECT COUNT(*) FROM reads WHERE tenant = ? AND user = ?",
                                               (tenant, user)).fetchone())
        return int(row[0])

    def erase(self, tenant: str, user: str) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT OR REPLACE INTO erased VALUES (?, ?, ?)", (tenant, user, time.time()))
            return int(conn.execute("DELETE FROM reads WHERE tenant = ? AND user = ?", (tenant, user)).rowcount)

        deleted = self._db.transaction(run)
        self._db.checkpoint()  # no copy of the rows stays in the write-ahead log
        return int(deleted)

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())
