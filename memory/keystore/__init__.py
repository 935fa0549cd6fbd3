"""The per-user key store: the root of crypto-erasure, a port like every other store.

A store keeps each user's data key *wrapped* (sealed under the master key, ``memory.crypto.UserKeys`` does
the wrapping and caching); it only has to put a wrapped key once, read it back, and delete it for good.
Chosen by ``MNEME_KEYS_URL`` (``memory.registry``):

    sqlite:///path/keys.db       SQLiteKeyStore   the embedded default, a file in the data dir
    redis://host:6379/1          RedisKeyStore    for a distributed deployment: every process, on every host,
                                                  sees the same keys (``memory.state.user_keys``)

Contract (``tests/keystore_contract.py``, run against both): ``put_if_absent`` keeps the first wrapped key
of a user, whoever races for it, and returns the one kept; ``get`` returns it or None; ``delete`` removes it
and says whether there was one, and after it no copy is readable (SQLite: WAL truncated, secure delete;
Redis: the append-only file is rewritten by erasure).
"""

from __future__ import annotations

from typing import Protocol


class KeyStore(Protocol):
    def put_if_absent(self, tenant: str, user_id: str, wrapped: bytes) -> bytes:
        """Keep ``wrapped`` unless the user has a key already; returns the key kept."""
        ...

    def get(self, tenant: str, user_id: str) -> bytes | None:
        ...

    def delete(self, tenant: str, user_id: str) -> bool:
        ...

    def ping(self) -> None:
        ...
