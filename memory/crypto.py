"""Per-user keys and what they protect.

Each user gets a random 256-bit data key, stored wrapped (AES-GCM) by the master key. Event texts are
sealed with the user's key and keyword-index tokens are keyed hashes (HMAC-SHA256) under it, so the
episodic store holds no plaintext content and destroying one key makes all of that user's sealed text
unreadable and their index tokens unmatchable (crypto-shredding).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from collections.abc import Sequence
from typing import Literal, overload

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory.errors import ConfigurationError, NotFound
from memory.files import private_dir
from memory.keystore import KeyStore
from memory.registry import open_backend
from memory.settings import Settings

_NONCE = 12
MAKE_MASTER_KEY = "`openssl rand -base64 32`"
CACHE_S = 30.0  # another process's erasure reaches this one's cache within this long


def load_master_key(settings: Settings) -> bytes:
    """``MNEME_MASTER_KEY`` (base64, 32 bytes), else, in development mode only (auth off), a key file created
    once in the data dir (mode 0600). With auth on and no ``MNEME_MASTER_KEY`` it refuses: a deployment's key
    is one an operator made and keeps a copy of, not one that appeared beside the data it protects."""
    if settings.master_key:
        try:
            key = base64.b64decode(settings.master_key)
        except binascii.Error:
            key = b""
        if len(key) != 32:
            raise ConfigurationError(f"MNEME_MASTER_KEY must be 32 bytes, base64-encoded ({MAKE_MASTER_KEY})")
        return key
    path = settings.data_dir / "master.key"
    if settings.auth_required:
        kept = f", or this data dir's development key: MNEME_MASTER_KEY=$(base64 -w0 {path})" if path.exists() else ""
        raise ConfigurationError(f"MNEME_AUTH_REQUIRED=true needs MNEME_MASTER_KEY: set it to a key of your own "
                                 f"({MAKE_MASTER_KEY}{kept}); only development mode (auth off) makes one by itself")
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(AESGCM.generate_key(bit_length=256))
    for _ in range(50):  # another process may be writing it right now
        key = path.read_bytes()
        if len(key) == 32:
            return key
        time.sleep(0.01)
    raise ConfigurationError(f"{path} is not a 32-byte key")


def seal(key: bytes, plaintext: bytes, context: str) -> bytes:
    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, context.encode())


def unseal(key: bytes, sealed: bytes, context: str) -> bytes:
    return AESGCM(key).decrypt(sealed[:_NONCE], sealed[_NONCE:], context.encode())


#: Starts every sealed text. Its first character is a control character, which ``memory.text.clean`` removes
#: from everything a user sends: no stored user text can start with it, so none is taken for sealed text.
SEALED_TEXT = "\x1fenc:v1:"


def seal_text(key: bytes, text: str, context: str) -> str:
    """Text sealed for storage where only strings fit (Redis records, task payloads)."""
    return SEALED_TEXT + base64.b64encode(seal(key, text.encode(), context)).decode()


def open_text(key: bytes | None, text: str, context: str) -> str | None:
    """The plaintext of ``seal_text``; cleaned text passes through as it is; None once the key is gone."""
    if not text.startswith(SEALED_TEXT):
        return text
    if key is None:
        return None
    try:
        return unseal(key, base64.b64decode(text[len(SEALED_TEXT):]), context).decode()
    except InvalidTag:
        return None


def keyed_tokens(key: bytes, tokens: Sequence[str]) -> list[str]:
    return [hmac.new(key, t.encode("utf-8"), hashlib.sha256).hexdigest()[:16] for t in tokens]


def keyed_hash(key: bytes, digest: str) -> str:
    """A text's hash as a store keeps it: keyed by the user's key (HMAC of the text's sha256), so no dictionary of
    likely messages finds it, and it says nothing once the key is destroyed."""
    return hmac.new(key, digest.encode("ascii"), hashlib.sha256).hexdigest()


class UserKeys:
    """Each user's data key, kept wrapped by the master key in a key store (``memory.keystore``), cached for
    ``CACHE_S`` (another process's erasure reaches this one's cache within that)."""

    def __init__(self, store: KeyStore, master: bytes) -> None:
        self._store = store
        self._master = master
        self._cache: dict[tuple[str, str], tuple[bytes, float]] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> UserKeys:
        return cls(open_backend("keys", settings.keys, settings), load_master_key(settings))

    @overload
    def get(self, tenant: str, user_id: str, create: Literal[True] = True) -> bytes: ...

    @overload
    def get(self, tenant: str, user_id: str, create: bool) -> bytes | None: ...

    def get(self, tenant: str, user_id: str, create: bool = True) -> bytes | None:
        """The user's data key; created on first use when ``create``, else None if there is none."""
        cached = self._cache.get((tenant, user_id))
        if cached is not None and time.monotonic() - cached[1] < CACHE_S:
            return cached[0]
        context = f"{tenant}\x1f{user_id}"
        if create:
            wrapped = self._store.put_if_absent(tenant, user_id,
                                                seal(self._master, AESGCM.generate_key(bit_length=256), context))
        else:
            stored = self._store.get(tenant, user_id)
            if stored is None:
                return None
            wrapped = stored
        try:
            key = unseal(self._master, wrapped, context)
        except InvalidTag as exc:
            raise ConfigurationError("a user key does not open with this master key (wrong MNEME_MASTER_KEY?)") from exc
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[(tenant, user_id)] = (key, time.monotonic())
        return key

    def destroy(self, tenant: str, user_id: str) -> None:
        """Crypto-shred: every text sealed with this key becomes unreadable."""
        self._cache.pop((tenant, user_id), None)
        if not self._store.delete(tenant, user_id):
            raise NotFound(f"no key for user {user_id!r}")

    def ping(self) -> None:
        self._store.ping()
