"""The cold archive contract (``memory.archive``), written once and run against every adapter.

A backend's test module subclasses :class:`ColdStoreContract` and provides a ``store`` fixture. Tests
never assume an empty store: every key lives under ``ns``, a prefix unique to one test, and every tenant
is unique to one test, so one bucket can be shared by all tests (and by several runs). The shared
helpers — key names, the object format, the merge rule — are tested here as well, through the store
where they meet it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from memory.archive import (
    ColdStore,
    archive_day,
    check_key,
    decode,
    encode,
    merge_records,
    object_key,
    user_prefix,
)
from memory.errors import InvalidInput, NotFound

ZH = "用户说：我想退款，订单号 12345，明天还要考试😅"
BAD_KEYS = ["", "/abs", "a/../b", "..", "../a", "a/..", "a..b", "a/./b", ".", "./a", "a//b", "a/", "a b", "a\\b",
            "用户/a", "a?b", "a%2Fb", "a\x00b", "a~b", "a\nb", "x" * 1025]
BAD_PREFIXES = ["/", "/a", "..", "a/../", "a/..", "a//", "a b/", "用户/", "./", "a/./", "a\\"]


def ev(event_id: str, **fields: object) -> dict:
    return {"event_id": event_id, "summary": fields.pop("summary", f"摘要 {event_id}"), **fields}


class ColdStoreContract:
    """Subclass and provide ``store``; every test here then runs against that adapter."""

    #: how many objects the test that lists and deletes past one S3 page (1,000 keys) writes; 0 skips it
    many_objects = 0

    @pytest.fixture
    def store(self) -> ColdStore:
        raise NotImplementedError("a backend's test class provides the store fixture")

    @pytest.fixture
    def ns(self) -> str:
        return f"contract-{uuid.uuid4().hex[:12]}/"

    @pytest.fixture
    def tenant(self) -> str:
        return f"tenant-{uuid.uuid4().hex[:12]}"

    # --- put / get ----------------------------------------------------------------------------

    def test_put_then_get_returns_the_same_bytes(self, store, ns):
        payloads = {
            f"{ns}zh.txt": ZH.encode("utf-8"),
            f"{ns}binary": bytes(range(256)) * 4,
            f"{ns}empty": b"",
            f"{ns}day/2026-11-30.jsonl.gz": encode([ev("e1", summary=ZH)]),
            f"{ns}A-z_0.9/.hidden/x.jsonl.gz": b"every key character",
        }
        for key, data in payloads.items():
            assert store.put(key, data) is None
        for key, data in payloads.items():
            assert store.get(key) == data
        assert decode(store.get(f"{ns}day/2026-11-30.jsonl.gz")) == [ev("e1", summary=ZH)]

    def test_put_replaces_an_object(self, store, ns):
        store.put(f"{ns}k", b"old " * 1000)
        store.put(f"{ns}k", "新的".encode())
        assert store.get(f"{ns}k") == "新的".encode()
        assert store.list(ns) == [f"{ns}k"]

    def test_get_of_a_missing_key_is_not_found(self, store, ns):
        store.put(f"{ns}dir/x", b"x")
        for missing in (f"{ns}nothing", f"{ns}dir", f"{ns}dir/x/y", f"{ns}di"):
            with pytest.raises(NotFound):
                store.get(missing)

    # --- list ---------------------------------------------------------------------------------

    def test_list_is_sorted_and_bounded_by_the_prefix(self, store, ns):
        keys = ["u1/2026-01-02.jsonl.gz", "u1/2026-01-01.jsonl.gz", "u1/sub/x", "u10/2026-01-01.jsonl.gz", "u2/a"]
        for key in random.sample(keys, len(keys)):
            store.put(ns + key, b"x")
        full = sorted(ns + k for k in keys)
        assert store.list(ns) == full
        assert store.list(ns + "u1/") == [ns + "u1/2026-01-01.jsonl.gz", ns + "u1/2026-01-02.jsonl.gz", ns + "u1/sub/x"]
        assert store.list(ns + "u1") == full[:4]  # a plain string prefix, as in S3: u10 too
        assert store.list(ns + "u1/2026-01-0") == full[:2]
        assert store.list(ns + "u1/2026-01-01.jsonl.gz") == [ns + "u1/2026-01-01.jsonl.gz"]
        assert store.list(ns + "nobody/") == [] and store.list(ns + "u3") == []
        assert set(full) <= set(store.list(""))

    def test_list_and_delete_go_past_one_page(self, store, ns):
        if not self.many_objects:
            pytest.skip("this backend has no pages; the S3 adapter runs it with 1,100 objects")
        keys = [f"{ns}many/{i:05d}" for i in range(self.many_objects)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda key: store.put(key, b"."), keys))
        store.put(f"{ns}other", b"kept")
        assert store.list(f"{ns}many/") == keys
        assert store.delete_prefix(f"{ns}many/") == self.many_objects
        assert store.list(ns) == [f"{ns}other"]

    # --- delete_prefix ------------------------------------------------------------------------

    def test_delete_prefix_counts_and_leaves_other_prefixes(self, store, ns):
        for key in ("u1/a", "u1/b/c", "u10/a", "u2/a"):
            store.put(ns + key, key.encode())
        assert store.delete_prefix(ns + "u1/") == 2
        assert store.list(ns) == [ns + "u10/a", ns + "u2/a"]
        assert store.get(ns + "u10/a") == b"u10/a"
        with pytest.raises(NotFound):
            store.get(ns + "u1/a")
        assert store.delete_prefix(ns + "u1/") == 0
        store.put(ns + "u1/b/c", b"again")  # the emptied "directories" can be written into again
        assert store.get(ns + "u1/b/c") == b"again"
        assert store.delete_prefix(ns) == 3 and store.list(ns) == []

    def test_delete_prefix_refuses_the_empty_prefix(self, store, ns):
        store.put(f"{ns}k", b"x")
        with pytest.raises(InvalidInput):
            store.delete_prefix("")
        assert store.get(f"{ns}k") == b"x"

    # --- keys ---------------------------------------------------------------------------------

    @pytest.mark.parametrize("key", BAD_KEYS)
    def test_bad_keys_are_invalid_input(self, store, key):
        with pytest.raises(InvalidInput):
            store.put(key, b"x")
        with pytest.raises(InvalidInput):
            store.get(key)

    @pytest.mark.parametrize("prefix", BAD_PREFIXES)
    def test_bad_prefixes_are_invalid_input(self, store, prefix):
        with pytest.raises(InvalidInput):
            store.list(prefix)
        with pytest.raises(InvalidInput):
            store.delete_prefix(prefix)

    # --- atomicity ----------------------------------------------------------------------------

    def test_readers_see_the_old_or_the_new_object_never_a_mix(self, store, ns):
        old, new = b"A" * 300_000, b"B" * 200_000 + "终".encode()
        store.put(f"{ns}k", old)
        done = threading.Event()

        def writer() -> None:
            try:
                for i in range(12):
                    store.put(f"{ns}k", new if i % 2 == 0 else old)
            finally:
                done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        seen = set()
        while not done.is_set() or not seen:
            data = store.get(f"{ns}k")
            assert data in (old, new), f"a reader saw {len(data)} bytes"
            seen.add(data[:1])
        thread.join()
        assert store.list(ns) == [f"{ns}k"]  # no temporary objects left visible

    def test_ping_answers_when_the_backend_is_up(self, store):
        assert store.ping() is None

    # --- the shared helpers -------------------------------------------------------------------

    def test_object_keys_hide_raw_ids_and_are_deterministic(self, store, tenant):
        key = object_key(tenant, "用户-alice", "2026-11-30")
        assert key == object_key(tenant, "用户-alice", "2026-11-30")
        assert re.fullmatch(r"[0-9a-f]{24}/[0-9a-f]{24}/2026-11-30\.jsonl\.gz", key)
        assert key.split("/")[0] == hashlib.sha256(tenant.encode()).hexdigest()[:24]  # pinned: names are forever
        assert tenant not in key and "alice" not in key and "用户" not in key
        assert key.startswith(user_prefix(tenant, "用户-alice")) and check_key(key) == key
        assert object_key(tenant, "用户-bob", "2026-11-30").split("/")[1] != key.split("/")[1]
        other_tenant = object_key(tenant + "x", "用户-alice", "2026-11-30")
        assert other_tenant.split("/")[0] != key.split("/")[0] and other_tenant.split("/")[1] != key.split("/")[1]
        store.put(key, b"x")
        assert store.list(user_prefix(tenant, "用户-alice")) == [key]
        assert store.delete_prefix(user_prefix(tenant, "用户-alice")) == 1

    @pytest.mark.parametrize("day", ["2026-13-01", "2026-02-30", "2026-1-1", "20261130", "../2026-11-30",
                                     "2026-11-30/x", ""])
    def test_object_keys_want_a_real_day(self, day):
        with pytest.raises(InvalidInput):
            object_key("t", "u", day)

    def test_object_keys_want_a_tenant_and_a_user(self):
        for tenant, user in (("", "u"), ("t", "")):
            with pytest.raises(InvalidInput):
                user_prefix(tenant, user)

    def test_encode_is_deterministic_and_decode_round_trips(self):
        records = [ev("e2", summary=ZH, keywords=["退款", "refund", "订单"], confidence=0.85,
                      nested={"b": 1, "a": None}),
                   ev("e1", summary="short answers please", ts=1764474000.25, count=3)]
        data = encode(records)
        assert data == encode([dict(reversed(list(r.items()))) for r in records])  # key order does not matter
        assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0"  # gzip, mtime 0
        assert decode(data) == records  # record order is kept
        lines = gzip.decompress(data).decode("utf-8").splitlines()
        assert ZH in lines[0] and list(json.loads(lines[0])) == sorted(records[0])  # raw UTF-8, sorted keys
        assert decode(encode([])) == []

    @pytest.mark.parametrize("records", [[{"a": {1, 2}}], [{"a": float("nan")}], [["not", "an", "object"]]])
    def test_encode_refuses_what_is_not_json_objects(self, records):
        with pytest.raises(InvalidInput):
            decode(encode(records))

    @pytest.mark.parametrize("data", [b"", b"not gzip", gzip.compress(b"\xff\xfe", mtime=0),
                                      gzip.compress(b"{\n", mtime=0), encode([{"a": 1}])[:-6],
                                      gzip.compress(b"[1]\n", mtime=0)])  # mtime 0: the same ids in every worker
    def test_decode_refuses_what_is_not_an_archive_object(self, data):
        with pytest.raises(InvalidInput):
            decode(data)

    def test_merge_is_a_union_by_event_id_where_new_wins(self):
        old = [ev("b"), ev("a", summary="旧")]
        new = [ev("c"), ev("a", summary="新")]
        merged = merge_records(old, new)
        assert [r["event_id"] for r in merged] == ["a", "b", "c"] and merged[0]["summary"] == "新"
        assert merge_records(merged, new) == merged and merge_records(merged, merged) == merged
        assert merge_records([], []) == []
        assert merge_records([{"id": "y"}], [{"id": "x"}], key="id") == [{"id": "x"}, {"id": "y"}]
        with pytest.raises(InvalidInput):
            merge_records(old, [{"summary": "no id"}])

    def test_archiving_the_same_events_twice_changes_nothing(self, store, tenant):
        day_key = object_key(tenant, "u", "2026-11-30")
        assert archive_day(store, tenant, "u", "2026-11-30", [ev("e2"), ev("e1", summary=ZH)]) == 2
        first = store.get(day_key)
        assert archive_day(store, tenant, "u", "2026-11-30", [ev("e1", summary=ZH), ev("e2")]) == 2
        assert store.get(day_key) == first
        assert archive_day(store, tenant, "u", "2026-11-30", [ev("e3"), ev("e2", summary="更新")]) == 3
        assert decode(store.get(day_key)) == [ev("e1", summary=ZH), ev("e2", summary="更新"), ev("e3")]
        archive_day(store, tenant, "u", "2026-12-01", [ev("e4")])
        archive_day(store, tenant, "other", "2026-11-30", [ev("e5")])
        assert store.list(user_prefix(tenant, "u")) == [day_key, object_key(tenant, "u", "2026-12-01")]
        assert store.delete_prefix(user_prefix(tenant, "u")) == 2  # erasing one user
        assert store.list(user_prefix(tenant, "u")) == []
        assert decode(store.get(object_key(tenant, "other", "2026-11-30"))) == [ev("e5")]
        store.delete_prefix(user_prefix(tenant, "other"))
