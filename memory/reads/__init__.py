"""The read log port: who was shown which of a user's memories, queryable by user.

Every read record also goes to the audit trail (``memory.services.trail``), which is append-only and
answers no question; this log holds the same records (same ids) by user, so "who saw what about me" is one
query, and erasure and export cover it like any store of user data (``memory.services.reads``). Records
name the user by their keyed hash (``memory.userhash``) and hold ids and score parts, never content.

    sqlite:///abs/path.db    SQLiteReadLog    the embedded default (``reads.db`` in the data dir)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

ACTIONS = ("read.recall", "read.profile", "read.list", "read.export")  # the audit actions of a read


def is_read(record: Mapping[str, Any]) -> bool:
    return record.get("action") in ACTIONS


class ReadLog(Protocol):
    def add(self, records: Sequence[dict[str, Any]]) -> None:
        """Store read records; a record already stored (same id) is left as it is."""
        ...

    def of_user(self, tenant: str, user: str, limit: int, before: float | None = None) -> list[dict[str, Any]]:
        """The user's read records, newest first, older than ``before`` when given."""
        ...

    def count(self, tenant: str, user: str) -> int: ...

    def erase(self, tenant: str, user: str) -> int:
        """Delete the user's records; how many there were. A record of a read made before now that arrives
        later (it was on its way) is not kept."""
        ...

    def ping(self) -> None: ...
