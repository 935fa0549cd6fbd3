"""Shared plumbing of the embedded SQLite adapters: URL parsing, one connection per thread, WAL."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from memory.errors import ConfigurationError, TransientError
from memory.files import private_dir

T = TypeVar("T")
MMAP_BYTES = 1 << 36  # the most of a file read through the memory map (64 GiB of address space, not of memory)


def sqlite_path(url: str) -> Path:
    """``sqlite:///relative/file.db`` or ``sqlite:////absolute/file.db``."""
    if not url.startswith("sqlite:///"):
        raise ConfigurationError(f"expected sqlite:///path/to/file.db, got {url!r}")
    return Path(url.removeprefix("sqlite:///"))


Column = tuple[str, str, str]  # table, column, its declaration


class SQLiteFile:
    """A database file with its schema; each thread gets its own connection. ``added``: columns the schema
    gained since files were first written, added to a file that lacks them when it is opened."""

    def __init__(self, path: Path, schema: str, name: str, page_size: int | None = None,
                 added: Sequence[Column] = ()) -> None:
        self._path, self._schema, self._name, self._page_size = path, schema, name, page_size
        self._added = added
        self._local = threading.local()
        self.run(lambda conn: None)  # create the schema now, not on the first request

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            private_dir(self._path.parent)
            if not self._path.exists():  # user data: the owner's only (SQLite gives -wal and -shm the same mode)
                os.close(os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600))
            conn = sqlite3.connect(self._path, timeout=30, isolation_level=None, check_same_thread=False)
            if self._page_size:  # takes effect when the file is created (before WAL), ignored after
                conn.execute(f"PRAGMA page_size = {int(self._page_size)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA secure_delete=ON")  # deleted rows are zeroed on disk, not left in free pages
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # reads map the file: no copy per page read
            conn.executescript(self._schema)
            _add_columns(conn, self._added)
            self._local.conn = conn
        return conn

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._conn())
        except sqlite3.OperationalError as exc:
            raise TransientError(f"{self._name} busy or unavailable: {exc}") from exc

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database and empty it (after an erasure: no old page copies)."""
        try:
            self.run(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        except Exception:  # noqa: BLE001 - busy readers: the sweeper's next run checkpoints again
            pass

    def transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside BEGIN IMMEDIATE … COMMIT: all of it happens, or none of it."""

        def wrapped(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return self.run(wrapped)


def _add_columns(conn: sqlite3.Connection, added: Sequence[Column]) -> None:
    for table, column, declaration in added:
        if column in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            continue
        try:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        except sqlite3.OperationalError as exc:  # another process added it first
            if "duplicate column" not in str(exc):
                raise
