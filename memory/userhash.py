"""The hashed user id that stands for a user in audit records, erasure receipts and tombstones.

``user_hash`` is HMAC-SHA256 of ``tenant \\x1f user_id`` under a key derived from the master key
(``memory.crypto.load_master_key``), cut to 32 hex characters. It is stable for one master key and cannot
be recomputed from a guessable id without the server's secret, as a plain sha256 of ``default\\x1falice``
could. No new secret to configure; a new master key gives every user a new hash.
"""

from __future__ import annotations

import hashlib
import hmac

HEX_CHARS = 32
PURPOSE = b"mneme user hash v1"  # the master key itself never keys this HMAC: a derived key does


def hashing_key(master: bytes) -> bytes:
    return hmac.new(master, PURPOSE, hashlib.sha256).digest()


def user_hash(key: bytes, tenant: str, user_id: str) -> str:
    return hmac.new(key, f"{tenant}\x1f{user_id}".encode(), hashlib.sha256).hexdigest()[:HEX_CHARS]
