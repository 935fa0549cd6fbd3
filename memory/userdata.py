"""Every store that holds a user's data, under one protocol: count, export, erase.

Erasure, its verification and the export (``memory.services.privacy``) loop over the one registry the
composition root builds (``Mneme.user_data``), so a store cannot be left out of one of them. The Redis
repositories (``memory.state``) implement the protocol themselves; the services that own a port holding user
data implement it for their port (episodic events, the graph, the archive), and the per-user keys through
``UserKey`` below. Every Redis key family in ``memory.state.keys`` names the store that covers it, or why it
holds no user data (``keys.ERASED_BY`` / ``keys.NO_USER_DATA``), and ``tests/test_userdata.py`` fails when a
family, or a store, is not covered. Order matters for erasure: the user's key goes last, so everything
sealed under it is deleted while it can still be told apart, and unreadable after.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memory.crypto import UserKeys
from memory.errors import NotFound


@runtime_checkable
class UserData(Protocol):
    """One store of user data. ``erase`` returns what it removed (its ``name`` → count, and finer counts
    where they say more: a session's messages and jobs)."""

    name: str

    def count(self, tenant: str, user_id: str) -> int: ...

    def export(self, tenant: str, user_id: str) -> Any: ...

    def erase(self, tenant: str, user_id: str) -> dict[str, int]: ...


class UserKey:
    """The user's key (``memory.crypto``): destroying it makes everything sealed under it unreadable."""

    name = "keys"

    def __init__(self, keys: UserKeys) -> None:
        self._keys = keys

    def count(self, tenant: str, user_id: str) -> int:
        return int(self._keys.get(tenant, user_id, create=False) is not None)

    def export(self, tenant: str, user_id: str) -> dict[str, bool]:
        return {"has_key": bool(self.count(tenant, user_id))}

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        try:
            self._keys.destroy(tenant, user_id)
        except NotFound:
            return {self.name: 0}
        return {self.name: 1}

