"""The hashed user id in audit records, erasure receipts and tombstones is keyed by the server's secret (an
HMAC under a key derived from the master key), not a plain sha256 of a guessable tenant and user id: stable
for one master key, different under another, the same in every process of a stack and in every record."""

import base64
import hashlib
import json
from pathlib import Path

import httpx

from memory.audit import record
from memory.mneme import Mneme
from memory.settings import Settings
from memory.state import keys
from memory.state.policy import Policies


def plain_sha256(tenant: str, user_id: str) -> str:
    return hashlib.sha256(f"{tenant}\x1f{user_id}".encode()).hexdigest()[:32]


def runtime_with(data_dir: Path, master: bytes | None = None) -> Mneme:
    key = base64.b64encode(master).decode() if master else ""
    return Mneme(Settings(_env_file=None, data_dir=data_dir, master_key=key))


def hashed(rt: Mneme, tenant: str, user_id: str) -> str:
    return record(rt.user_hash_key, tenant, user_id, "test.hash", "test:1", "test", "human")["user"]


def test_erasure_receipt_audit_records_and_tombstone_carry_one_keyed_hash(stack, runtime, uid):
    user = f"hash{uid}"
    httpx.put(f"{stack.api_url}/v1/users/{user}/consent",
              json={"long_term": True, "operator_id": "agent"}).raise_for_status()
    receipt = httpx.delete(f"{stack.api_url}/v1/users/{user}", params={"operator_id": "dpo"}).json()
    assert receipt["user"] != plain_sha256("default", user)
    assert len(receipt["user"]) == 32 and int(receipt["user"], 16) >= 0
    log = [json.loads(line) for line in Path(stack.settings.audit.removeprefix("file://")).read_text().splitlines()]
    mine = [r for r in log if r["user"] == receipt["user"]]
    assert {r["action"] for r in mine} >= {"consent.grant", "user.erase"}
    assert not [r for r in log if r["user"] == plain_sha256("default", user)]
    tombstones = keys.tombstones("default")
    assert runtime.state.client.zscore(tombstones, receipt["user"]) == receipt["erased_at"]
    assert runtime.state.client.zscore(tombstones, plain_sha256("default", user)) is None
    assert hashed(runtime, "default", user) == receipt["user"]  # this process derives the API's key


def test_the_hash_is_stable_for_one_master_key_and_differs_under_another(tmp_path):
    one = runtime_with(tmp_path / "a", b"1" * 32)
    again = runtime_with(tmp_path / "b", b"1" * 32)
    other = runtime_with(tmp_path / "a", b"2" * 32)
    assert hashed(one, "default", "alice") == hashed(again, "default", "alice")
    assert hashed(one, "default", "alice") != hashed(other, "default", "alice")
    assert hashed(one, "default", "alice") != plain_sha256("default", "alice")
    assert len({hashed(one, "default", "alice"), hashed(one, "default", "bob"), hashed(one, "other", "alice"),
                hashed(one, "default", "小明")}) == 4


def test_without_a_configured_key_the_data_dirs_key_file_keys_the_hash(tmp_path):
    first, restarted = runtime_with(tmp_path / "a"), runtime_with(tmp_path / "a")
    elsewhere = runtime_with(tmp_path / "b")
    assert hashed(first, "default", "alice") == hashed(restarted, "default", "alice")
    assert hashed(first, "default", "alice") != hashed(elsewhere, "default", "alice")


def test_a_tombstone_matches_only_under_the_key_that_wrote_it(runtime, tmp_path, uid):
    tenant = f"hash-t{uid}"
    mine = Policies(runtime.state.client, runtime.settings, runtime_with(tmp_path / "a", b"1" * 32).user_hash_key)
    theirs = Policies(runtime.state.client, runtime.settings, runtime_with(tmp_path / "b", b"2" * 32).user_hash_key)
    try:
        mine.tombstone(tenant, "alice", at=1000.0)
        assert mine.erased_after(tenant, "alice", received_at=999.0)
        assert not theirs.erased_after(tenant, "alice", received_at=999.0)
        assert runtime.state.client.zscore(keys.tombstones(tenant), plain_sha256(tenant, "alice")) is None
    finally:
        runtime.state.client.delete(keys.tombstones(tenant), keys.erasing(tenant))
