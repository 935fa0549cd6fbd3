"""The key-store contract (``memory.keystore``), run against every adapter: the embedded SQLite file and the
Redis-backed store (a real Valkey), and through ``UserKeys`` the crypto-erasure it is the root of."""

from __future__ import annotations

import base64
import threading

import pytest

from memory.crypto import UserKeys, open_text, seal_text
from memory.errors import NotFound
from memory.keystore.sqlite import SQLiteKeyStore
from memory.settings import Settings
from memory.state.user_keys import RedisKeyStore


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path, valkey_url):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    if request.param == "sqlite":
        return SQLiteKeyStore.from_url(f"sqlite:///{tmp_path / 'keys.db'}", settings)
    return RedisKeyStore.from_url(valkey_url, settings)


def test_the_first_key_put_is_kept_and_read_back(store, uid):
    assert store.get("t", f"u{uid}") is None
    assert store.put_if_absent("t", f"u{uid}", b"first") == b"first"
    assert store.put_if_absent("t", f"u{uid}", b"second") == b"first"  # a later put keeps the first
    assert store.get("t", f"u{uid}") == b"first"
    assert store.get("other", f"u{uid}") is None  # tenants do not share keys


def test_racing_puts_agree_on_one_key(store, uid):
    kept: list[bytes] = []
    threads = [threading.Thread(target=lambda n=n: kept.append(store.put_if_absent("t", f"r{uid}", b"k%d" % n)))
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(kept)) == 1 and store.get("t", f"r{uid}") == kept[0]


def test_delete_removes_the_key_for_good(store, uid):
    store.put_if_absent("t", f"d{uid}", b"secret-key")
    assert store.delete("t", f"d{uid}") and not store.delete("t", f"d{uid}")
    assert store.get("t", f"d{uid}") is None
    store.ping()


def test_user_keys_on_the_store_crypto_erase_a_user(store, uid):
    keys = UserKeys(store, base64.b64decode(base64.b64encode(b"m" * 32)))
    key = keys.get("t", f"e{uid}")
    sealed = seal_text(key, "我叫王小明 my name is Ming", "ctx")
    assert open_text(keys.get("t", f"e{uid}", create=False), sealed, "ctx") == "我叫王小明 my name is Ming"
    keys.destroy("t", f"e{uid}")
    assert keys.get("t", f"e{uid}", create=False) is None
    assert UserKeys(store, b"m" * 32).get("t", f"e{uid}", create=False) is None  # another process too
    with pytest.raises(NotFound):
        keys.destroy("t", f"e{uid}")
