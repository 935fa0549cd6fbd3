"""The embedded key store: one SQLite file (secure delete on, WAL truncated after a delete)."""

from __future__ import annotations

import sqlite3
import time

from memory.settings import Settings
from memory.sqlite import SQLiteFile, sqlite_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS user_keys (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    wrapped BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, user_id)
);
"""


class SQLiteKeyStore:
    def __init__(self, db: SQLiteFile) -> None:
        self._db = db

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> SQLiteKeyStore:
        return cls(SQLiteFile(sqlite_path(url), _SCHEMA, "key store"))

    def put_if_absent(self, tenant: str, user_id: str, wrapped: bytes) -> bytes:
        def put(conn: sqlite3.Connection) -> bytes:
            conn.execute("INSERT OR IGNORE INTO user_keys VALUES (?, ?, ?, ?)", (tenant, user_id, wrapped, time.time()))
            kept: bytes = conn.execute("SELECT wrapped FROM user_keys WHERE tenant = ? AND user_id = ?",
                                       (tenant, user_id)).fetchone()[0]
            return kept

        return self._db.transaction(put)

    def get(self, tenant: str, user_id: str) -> bytes | None:
        row = self._db.run(lambda c: c.execute("SELECT wrapped FROM user_keys WHERE tenant = ? AND user_id = ?",
                                               (tenant, user_id)).fetchone())
        return row[0] if row else None

    def delete(self, tenant: str, user_id: str) -> bool:
        deleted = self._db.run(
            lambda c: c.execute("DELETE FROM user_keys WHERE tenant = ? AND user_id = ?", (tenant, user_id)).rowcount)
        self._db.checkpoint()  # no copy of the wrapped key stays in the write-ahead log
        return bool(deleted)

    def ping(self) -> None:
        self._db.run(lambda c: c.execute("SELECT 1").fetchone())
