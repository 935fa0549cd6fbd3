"""Which messages a memory came from, and a set of them to take back. A message id is its session's own — two
sessions of one user may both number their messages m1, m2, … — so long-term memory names a message by its
session and id. Where a row names no session (graph evidence written before it kept one, the record of a
deletion that took back messages of several sessions at once), it matches the id in any session: for a
deletion, the reading that leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple


class MessageRef(NamedTuple):
    session_id: str | None  # None: the id in any session of the user
    message_id: str


class Messages:
    """Messages of one user, by session and id (``MessageRef``)."""

    def __init__(self, refs: Iterable[MessageRef] = ()) -> None:
        self._refs = frozenset(refs)
        self._ids = frozenset(m for _, m in self._refs)
        self._anywhere = frozenset(m for s, m in self._refs if s is None)

    @classmethod
    def of_session(cls, session_id: str, message_ids: Iterable[str]) -> Messages:
        return cls(MessageRef(session_id, m) for m in message_ids)

    def holds(self, session_id: str | None, message_id: str) -> bool:
        """Whether the message is one of these; a side that names no session matches the id in any."""
        if message_id not in self._ids:
            return False
        return session_id is None or message_id in self._anywhere or (session_id, message_id) in self._refs

    def covers(self, session_id: str | None, message_ids: Iterable[str]) -> bool:
        """Whether these hold every one of a row's messages (a row with none is not covered)."""
        ids = list(message_ids)
        return bool(ids) and all(self.holds(session_id, m) for m in ids)

    def ids(self) -> list[str]:
        """The message ids, sorted: what a receipt lists, and what a store looks rows up by."""
        return sorted(self._ids)

    def sessions(self) -> set[str | None]:
        return {s for s, _ in self._refs}

    def __or__(self, other: Messages) -> Messages:
        return Messages(self._refs | other._refs)

    def __bool__(self) -> bool:
        return bool(self._refs)

    def __iter__(self) -> Iterator[MessageRef]:
        return iter(self._refs)
