"""The episodic store contract (``memory.episodic``), written once and run against every adapter.

A backend's test module subclasses :class:`EpisodicContract` and provides a ``store`` fixture. Tests
never assume an empty backend: every user and event id comes from ``fresh_ids``, so one server can be
shared by all tests (and by several runs). Tokens are opaque strings shaped like the keyed tokens
``memory.crypto.keyed_tokens`` produces; vectors are unit vectors of one dimension per user.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterable, Sequence

import numpy as np
import pytest

from memory.episodic import (
    EVICTED,
    LIVE,
    MAX_MERGED_CONFIDENCE,
    MERGED,
    EpisodicStore,
    StoredEvent,
    eviction_value,
    merged_confidence,
)
from memory.models import EventType, Role
from memory.provenance import Messages
from memory.purposes import ANY

T = "t"
DIM = 4
DAY = 86400.0


class FreshIds:
    """Short names → ids unique to one test: ``ids("u")`` is the same id each time within a test."""

    def __init__(self) -> None:
        self._suffix = "-" + uuid.uuid4().hex[:12]

    def __call__(self, name: str) -> str:
        return name + self._suffix

    def names(self, ids: Iterable[str]) -> list[str]:
        """Back to the short names, for readable assertions."""
        return [i.removesuffix(self._suffix) for i in ids]


def tok(word: str) -> str:
    """An opaque token, like a keyed one: the store must treat it as an atom."""
    return hashlib.sha256(word.encode()).hexdigest()[:16]


def unit(*values: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def rows(*vectors: np.ndarray) -> np.ndarray:
    return np.stack(vectors).astype(np.float32)


class EpisodicContract:
    """Subclass and provide ``store``; every test here then runs against that adapter."""

    @pytest.fixture
    def store(self) -> EpisodicStore:
        raise NotImplementedError("a backend's test class provides the store fixture")

    def fresh_ids(self) -> FreshIds:
        return FreshIds()

    @pytest.fixture
    def ids(self) -> FreshIds:
        return self.fresh_ids()

    @staticmethod
    def event(ids: FreshIds, name: str, user: str = "u", kind: EventType = EventType.question,
              tokens: Sequence[str] = (), ts: float = 1.0, conf: float = 0.8, role: Role = Role.user,
              message_ids: Sequence[str] | None = None, weight: float = 1.0,
              sealed: bytes = b"opaque", purposes: Sequence[str] = (ANY,), session: str = "s") -> StoredEvent:
        return StoredEvent(event_id=ids(name), tenant=T, user_id=ids(user), session_id=session, ts=ts, event_type=kind,
                           role=role, lang="zh", text_hash=hashlib.sha256(name.encode()).hexdigest(),
                           message_ids=list(message_ids or [f"m-{name}"]), confidence=conf, weight=weight,
                           sealed=sealed, tokens=list(tokens), purposes=list(purposes))

    # --- add: insert, idempotence -----------------------------------------------------------

    def test_new_events_are_inserted_in_the_order_given(self, store, ids):
        events = [self.event(ids, "a"), self.event(ids, "c", user="other"), self.event(ids, "b")]
        report = store.add(events, rows(unit(1), unit(1), unit(0, 1)), 0.95, 200)
        assert ids.names(report.inserted) == ["a", "c", "b"]
        assert not report.merged and not report.known and not report.evicted
        assert store.live_count(T, ids("u")) == 2 and store.live_count(T, ids("other")) == 1

    def test_redelivery_is_known_and_changes_nothing(self, store, ids):
        events = [self.event(ids, "a"), self.event(ids, "b", kind=EventType.preference),
                  self.event(ids, "c", user="other")]
        vectors = rows(unit(1), unit(0, 1), unit(1))
        store.add(events, vectors, 0.95, 200)
        before = store.get(T, ids("u"), [ids("a"), ids("b")])
        again = store.add(events, vectors, 0.95, 200)
        assert ids.names(again.known) == ["a", "b", "c"]
        assert not again.inserted and not again.merged and not again.evicted
        assert store.get(T, ids("u"), [ids("a"), ids("b")]) == before
        assert store.live_count(T, ids("u")) == 2

    def test_an_id_repeated_in_one_call_is_known_the_second_time(self, store, ids):
        report = store.add([self.event(ids, "a"), self.event(ids, "a")], rows(unit(1), unit(1)), 0.95, 200)
        assert ids.names(report.inserted) == ["a"] and ids.names(report.known) == ["a"] and not report.merged
        [stored] = store.get(T, ids("u"), [ids("a")])
        assert stored.count == 1

    def test_the_id_of_a_merged_event_stays_known(self, store, ids):
        refund = unit(1, 0.05)
        store.add([self.event(ids, "r0")], rows(refund), 0.9, 200)
        assert store.add([self.event(ids, "r1")], rows(refund), 0.9, 200).merged == {ids("r1"): ids("r0")}
        again = store.add([self.event(ids, "r1")], rows(unit(0, 1)), 0.9, 200)  # even with another vector
        assert ids.names(again.known) == ["r1"] and not again.inserted and not again.merged
        [merged] = store.get(T, ids("u"), [ids("r0")])
        assert merged.count == 2 and merged.message_ids == ["m-r0", "m-r1"]
        [absorbed] = store.get(T, ids("u"), [ids("r1")])  # kept verbatim in the deep tier, pointing at r0
        assert (absorbed.status, absorbed.canonical_id, absorbed.count) == (MERGED, ids("r0"), 1)
        assert absorbed.message_ids == ["m-r1"]

    # --- add: merging -----------------------------------------------------------------------

    def test_similar_events_of_one_user_type_and_role_merge_with_all_provenance(self, store, ids):
        refund = unit(1, 0.05)
        for name, ts in (("r0", 10.0), ("r1", 30.0), ("r2", 20.0)):  # three "怎么退款", the latest not last
            store.add([self.event(ids, name, tokens=[tok("退款")], ts=ts, conf=0.7)], rows(refund), 0.9, 200)
        [merged] = store.get(T, ids("u"), [ids("r0")])
        assert merged.count == 3 and merged.message_ids == ["m-r0", "m-r1", "m-r2"] and merged.ts == 30.0
        assert merged.confidence == pytest.approx(merged_confidence(merged_confidence(0.7, 0.7), 0.7))
        assert merged.confidence == pytest.approx(1 - 0.3 ** 3)
        assert store.live_count(T, ids("u")) == 1
        assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [tok("退款")], None, 10, (LIVE,))) == ["r0"]
        found = ids.names(e for e, _ in store.keyword_search(T, ids("u"), [tok("退款")], None, 10))
        assert sorted(found) == ["r0", "r1", "r2"]  # every message stays findable

    def test_events_in_one_call_merge_into_each_other(self, store, ids):
        events = [self.event(ids, "r0", conf=0.5), self.event(ids, "r1", conf=0.6)]
        report = store.add(events, rows(unit(1), unit(1)), 0.9, 200)
        assert ids.names(report.inserted) == ["r0"] and report.merged == {ids("r1"): ids("r0")}
        [merged] = store.get(T, ids("u"), [ids("r0")])
        assert merged.count == 2 and merged.confidence == pytest.approx(merged_confidence(0.5, 0.6))

    def test_one_call_keeps_each_kind_apart_and_merges_into_what_was_stored_before(self, store, ids):
        store.add([self.event(ids, "base")], rows(unit(1)), 0.9, 200)
        events = [self.event(ids, "pref", kind=EventType.preference), self.event(ids, "said", role=Role.assistant),
                  self.event(ids, "theirs", user="other"), self.event(ids, "again"),
                  self.event(ids, "pref2", kind=EventType.preference), self.event(ids, "new")]
        report = store.add(events, rows(*[unit(1)] * 5, unit(0, 1)), 0.9, 200)
        assert ids.names(report.inserted) == ["pref", "said", "theirs", "new"]
        assert report.merged == {ids("again"): ids("base"), ids("pref2"): ids("pref")}
        assert store.live_count(T, ids("u")) == 4 and store.live_count(T, ids("other")) == 1

    def test_merging_needs_cosine_at_the_threshold(self, store, ids):
        near = unit(1, 0.5)  # cosine 0.894 with unit(1)
        for user, threshold in (("strict", 0.9), ("loose", 0.85)):
            store.add([self.event(ids, f"{user}-0", user=user)], rows(unit(1)), threshold, 200)
            store.add([self.event(ids, f"{user}-1", user=user)], rows(near), threshold, 200)
        assert store.live_count(T, ids("strict")) == 2
        assert store.live_count(T, ids("loose")) == 1

    def test_merged_confidence_is_capped(self, store, ids):
        for i in range(4):
            store.add([self.event(ids, f"r{i}", conf=0.9)], rows(unit(1)), 0.9, 200)
        [merged] = store.get(T, ids("u"), [ids("r0")])
        assert merged.count == 4 and merged.confidence == pytest.approx(MAX_MERGED_CONFIDENCE)

    def test_message_ids_are_united_without_duplicates(self, store, ids):
        store.add([self.event(ids, "r0", message_ids=["m1", "m2"])], rows(unit(1)), 0.9, 200)
        store.add([self.event(ids, "r1", message_ids=["m2", "m3"])], rows(unit(1)), 0.9, 200)
        [merged] = store.get(T, ids("u"), [ids("r0")])
        assert merged.message_ids == ["m1", "m2", "m3"]

    def test_no_merge_across_types_roles_or_users(self, store, ids):
        same = rows(unit(1))
        store.add([self.event(ids, "base")], same, 0.9, 200)
        others = [self.event(ids, "pref", kind=EventType.preference),
                  self.event(ids, "said", role=Role.assistant),
                  self.event(ids, "theirs", user="other")]
        for other in others:
            assert store.add([other], same, 0.9, 200).inserted == [other.event_id]
        [base] = store.get(T, ids("u"), [ids("base")])
        assert base.count == 1 and base.message_ids == ["m-base"]
        assert store.live_count(T, ids("u")) == 3 and store.live_count(T, ids("other")) == 1

    def test_an_evicted_event_absorbs_nothing(self, store, ids):
        now = time.time()
        store.add([self.event(ids, "chat", kind=EventType.small_talk, ts=now),
                   self.event(ids, "fact", kind=EventType.age_declaration, ts=now)],
                  rows(unit(1), unit(0, 1)), 0.9, 1)
        report = store.add([self.event(ids, "chat2", kind=EventType.small_talk, ts=now)], rows(unit(1)), 0.9, 1)
        assert ids.names(report.inserted) == ["chat2"] and not report.merged
        assert ids.names(e.event_id for e in report.evicted) == ["chat2"]
        [chat] = store.get(T, ids("u"), [ids("chat")])
        assert chat.count == 1 and chat.status == "evicted"

    # --- add: the cap -----------------------------------------------------------------------

    def test_the_cap_evicts_the_lowest_value_events_and_reports_them(self, store, ids):
        now = time.time()
        events = [self.event(ids, "chat", kind=EventType.small_talk, ts=now, conf=0.9),
                  self.event(ids, "old_weak", kind=EventType.statement, ts=now - 200 * DAY, conf=0.3),
                  self.event(ids, "fresh_fact", kind=EventType.age_declaration, ts=now, conf=0.9),
                  self.event(ids, "old_fact", kind=EventType.concept_confusion, ts=now - 200 * DAY, conf=0.9)]
        report = store.add(events, np.eye(DIM, dtype=np.float32), 0.99, 2)
        by_value = sorted(events, key=lambda e: eviction_value(e, now))
        assert {e.event_id for e in report.evicted} == {e.event_id for e in by_value[:2]}
        assert sorted(ids.names(e.event_id for e in report.evicted)) == ["chat", "old_weak"]
        kinds = {ids("chat"): EventType.small_talk, ids("old_weak"): EventType.statement}
        for evicted in report.evicted:
            assert (evicted.tenant, evicted.user_id, evicted.event_type) == (T, ids("u"), kinds[evicted.event_id])
        assert store.live_count(T, ids("u")) == 2

    def test_a_repeated_event_is_worth_more(self, store, ids):
        store.add([self.event(ids, "a0", kind=EventType.statement, conf=0.5, ts=time.time())], rows(unit(1)), 0.9, 10)
        store.add([self.event(ids, "a1", kind=EventType.statement, conf=0.5, ts=time.time())], rows(unit(1)), 0.9, 10)
        report = store.add([self.event(ids, "b", kind=EventType.statement, conf=0.8, ts=time.time())],
                           rows(unit(0, 1)), 0.9, 1)
        # a: 0.5 × 0.75 × (1 + log2 2) = 0.75 beats b: 0.5 × 0.8 × 1 = 0.4, though b's confidence is higher
        assert ids.names(e.event_id for e in report.evicted) == ["b"]

    def test_of_one_type_the_assistants_reply_leaves_the_layer_before_what_the_user_said(self, store, ids):
        now = time.time()
        events = [self.event(ids, "reply", kind=EventType.statement, role=Role.assistant, ts=now, conf=0.9),
                  self.event(ids, "said", kind=EventType.statement, ts=now - 60 * DAY, conf=0.5)]
        report = store.add(events, rows(unit(1), unit(0, 1)), 0.9, 1)
        assert ids.names(e.event_id for e in report.evicted) == ["reply"]  # though newer and more confident
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), unit(1), None, 1)) == ["reply"]  # still found

    def test_evicted_events_leave_the_event_layer_but_stay_searchable(self, store, ids):
        now = time.time()
        events = [self.event(ids, "chat", kind=EventType.small_talk, tokens=[tok("天气"), tok("weather")], ts=now),
                  self.event(ids, "fact", kind=EventType.age_declaration, tokens=[tok("17岁")], ts=now)]
        report = store.add(events, rows(unit(1), unit(0, 1)), 0.9, 1)
        assert ids.names(e.event_id for e in report.evicted) == ["chat"]
        assert store.keyword_search(T, ids("u"), [tok("天气"), tok("weather")], None, 10, (LIVE,)) == []
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), unit(1), None, 10, (LIVE,))) == ["fact"]
        assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [tok("天气")], None, 10)) == ["chat"]
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), unit(1), None, 1)) == ["chat"]
        [chat] = store.get(T, ids("u"), [ids("chat")])  # kept, not silently deleted
        assert chat.status == "evicted" and chat.sealed == b"opaque"
        assert store.live_count(T, ids("u")) == 1

    def test_the_cap_counts_each_user_alone(self, store, ids):
        store.add([self.event(ids, f"o{i}", user="other", kind=EventType.statement) for i in range(3)],
                  rows(unit(1), unit(0, 1), unit(0, 0, 1)), 0.99, 200)
        report = store.add([self.event(ids, f"u{i}", kind=EventType.statement) for i in range(3)],
                           rows(unit(1), unit(0, 1), unit(0, 0, 1)), 0.99, 1)
        assert len(report.evicted) == 2 and {e.user_id for e in report.evicted} == {ids("u")}
        assert store.live_count(T, ids("u")) == 1 and store.live_count(T, ids("other")) == 3

    def test_over_the_cap_chit_chat_and_thanks_leave_before_an_old_statement_of_fact(self, store, ids):
        now = time.time()
        events = [self.event(ids, "old_fact", kind=EventType.statement, ts=now - 400 * DAY, conf=0.5),
                  self.event(ids, "thanks", kind=EventType.feedback, ts=now, conf=0.9),
                  self.event(ids, "chat", kind=EventType.small_talk, ts=now, conf=0.9)]
        report = store.add(events, np.eye(DIM, dtype=np.float32)[:3], 0.99, 1)
        assert sorted(ids.names(e.event_id for e in report.evicted)) == ["chat", "thanks"]
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), unit(1), None, 5, (LIVE,))) == ["old_fact"]

    def test_over_the_cap_similar_events_consolidate_instead_of_leaving(self, store, ids):
        now = time.time()
        a, b = unit(1, 0.6), unit(1, 0.0)  # cosine 0.857: under the merge threshold, over the consolidation one
        events = [self.event(ids, "a", kind=EventType.statement, ts=now, conf=0.6, tokens=[tok("a")]),
                  self.event(ids, "b", kind=EventType.statement, ts=now, conf=0.8, tokens=[tok("b")]),
                  self.event(ids, "c", kind=EventType.statement, ts=now, conf=0.5, tokens=[tok("c")])]
        report = store.add(events, rows(a, b, unit(0, 0, 1)), 0.9, 2, consolidate_threshold=0.8)
        assert [(c.event_id, c.into) for c in report.consolidated] == [(ids("a"), ids("b"))] and not report.evicted
        [kept, absorbed] = store.get(T, ids("u"), [ids("b"), ids("a")])
        assert kept.count == 2 and kept.message_ids == ["m-b", "m-a"] and kept.status == LIVE
        assert (absorbed.status, absorbed.canonical_id) == (MERGED, ids("b"))
        assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [tok("a")], None, 5)) == ["a"]

    def test_nothing_becomes_unfindable_however_far_over_the_cap(self, store, ids):
        events = [self.event(ids, f"e{i}", kind=EventType.statement, tokens=[tok(f"w{i}")], ts=float(i))
                  for i in range(30)]
        vectors = np.random.default_rng(7).normal(size=(30, DIM)).astype(np.float32)
        store.add(events, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), 0.999, 5,
                  consolidate_threshold=0.999)
        assert store.live_count(T, ids("u")) == 5
        for i in range(30):
            assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [tok(f"w{i}")], None, 5)) == [f"e{i}"]

    def test_an_overflow_frees_a_tenth_of_the_layer_so_the_next_events_go_in_unweighed(self, store, ids):
        rng = np.random.default_rng(3)

        def add(names, cap=20):
            vectors = rng.normal(size=(len(names), DIM)).astype(np.float32)
            return store.add([self.event(ids, n, kind=EventType.statement, ts=time.time()) for n in names],
                             vectors / np.linalg.norm(vectors, axis=1, keepdims=True), 0.999, cap, 0.999)

        assert not add([f"e{i}" for i in range(20)]).evicted and store.live_count(T, ids("u")) == 20
        assert len(add(["e20"]).evicted) == 3 and store.live_count(T, ids("u")) == 18  # 21 → cap_floor(20)
        assert not add(["e21", "e22"]).evicted and store.live_count(T, ids("u")) == 20  # room: none weighed
        assert len(add(["e23"]).evicted) == 3 and store.live_count(T, ids("u")) == 18
        assert len(store.vector_search(T, ids("u"), unit(1), None, 30)) == 24  # all still findable

    def test_consolidate_holds_a_user_to_a_lowered_cap(self, store, ids):
        store.add([self.event(ids, f"e{i}", kind=EventType.statement) for i in range(4)],
                  np.eye(DIM, dtype=np.float32), 0.99, 200)
        report = store.consolidate(T, ids("u"), 2, 0.99)
        assert len(report.evicted) == 2 and store.live_count(T, ids("u")) == 2
        assert len(store.vector_search(T, ids("u"), unit(1), None, 10)) == 4

    # --- keyword search ---------------------------------------------------------------------

    def test_keyword_search_ranks_by_bm25_over_the_given_tokens(self, store, ids):
        a, b, c, z = tok("加速度"), tok("速度"), tok("physics"), tok("动画")
        events = [self.event(ids, "one", tokens=[a, tok("x1"), tok("y1"), tok("z1")]),
                  self.event(ids, "both", tokens=[a, b, tok("x2"), tok("y2")]),
                  self.event(ids, "none", tokens=[c, tok("x3"), tok("y3"), tok("z3")]),
                  self.event(ids, "once", tokens=[z, tok("x4"), tok("y4"), tok("z4")]),
                  self.event(ids, "twice", tokens=[z, z, tok("x5"), tok("y5")])]
        store.add(events, rows(unit(1), unit(0, 1), unit(0, 0, 1), unit(0, 0, 0, 1), unit(1, -1, 1, -1)), 0.9, 200)
        hits = store.keyword_search(T, ids("u"), [a, b, a], None, 10)
        assert ids.names(e for e, _ in hits) == ["both", "one"]  # more of the query's tokens first
        assert hits[0][1] > hits[1][1] > 0
        tf = store.keyword_search(T, ids("u"), [z], None, 10)
        assert ids.names(e for e, _ in tf) == ["twice", "once"] and tf[0][1] > tf[1][1] > 0
        assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [a, b], None, 1)) == ["both"]

    def test_keyword_scores_are_shares_of_the_query_with_the_users_own_statistics(self, store, ids):
        common, rare = tok("want"), tok("Mei")
        filler = [self.event(ids, f"f{i}", tokens=[common, tok(f"x{i}")]) for i in range(8)]
        answer = self.event(ids, "answer", tokens=[common, rare])
        store.add([*filler, answer], np.tile(unit(1), (9, 1)), 2.0, 200)
        scores = dict(store.keyword_search(T, ids("u"), [common, rare], None, 20))
        assert max(scores, key=scores.get) == ids("answer")
        assert 0.8 < scores[ids("answer")] < 1.3  # every query term, at average length: about 1
        assert scores[ids("f0")] < 0.2  # a word most memories share counts for little
        store.add([self.event(ids, f"o{i}", user="other", tokens=[rare]) for i in range(20)],
                  np.tile(unit(1), (20, 1)), 2.0, 200)
        again = dict(store.keyword_search(T, ids("u"), [common, rare], None, 20))
        assert again[ids("answer")] == pytest.approx(scores[ids("answer")], rel=0.05)  # another user changes nothing

    def test_keyword_search_sees_one_user_and_the_types_asked_for(self, store, ids):
        k1, k3 = tok("退款"), tok("refund")
        store.add([self.event(ids, "q", tokens=[k1, k3]),
                   self.event(ids, "p", kind=EventType.preference, tokens=[k3]),
                   self.event(ids, "theirs", user="other", tokens=[k1, k3])],
                  rows(unit(1), unit(0, 1), unit(1)), 0.95, 200)
        assert ids.names(e for e, _ in store.keyword_search(T, ids("u"), [k1], None, 10)) == ["q"]
        assert ids.names(e for e, _ in store.keyword_search(T, ids("other"), [k1], None, 10)) == ["theirs"]
        assert store.keyword_search(T, ids("u"), [k3], {EventType.dislike}, 10) == []
        typed = store.keyword_search(T, ids("u"), [k3], {EventType.preference, EventType.goal}, 10)
        assert ids.names(e for e, _ in typed) == ["p"]
        assert store.keyword_search(T, ids("u"), [tok("nothing")], None, 10) == []
        assert store.keyword_search(T, ids("u"), [], None, 10) == []
        assert store.keyword_search(T, ids("nobody"), [k1], None, 10) == []

    # --- vector search ----------------------------------------------------------------------

    def test_vector_search_orders_by_cosine_and_filters_types(self, store, ids):
        vectors = {"a": unit(1), "c": unit(1, 1), "b": unit(0, 1)}
        store.add([self.event(ids, "a"), self.event(ids, "c"), self.event(ids, "b", kind=EventType.preference),
                   self.event(ids, "theirs", user="other")],
                  rows(vectors["a"], vectors["c"], vectors["b"], unit(1)), 0.99, 200)
        query = unit(1, 0.1)
        hits = store.vector_search(T, ids("u"), query, None, 10)
        assert ids.names(e for e, _ in hits) == ["a", "c", "b"]
        for (_, score), name in zip(hits, ["a", "c", "b"], strict=True):
            assert score == pytest.approx(float(vectors[name] @ query), abs=1e-4)
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), query, None, 2)) == ["a", "c"]
        assert ids.names(e for e, _ in store.vector_search(T, ids("u"), query, {EventType.preference}, 10)) == ["b"]
        assert ids.names(e for e, _ in store.vector_search(T, ids("other"), query, None, 10)) == ["theirs"]
        assert store.vector_search(T, ids("nobody"), query, None, 10) == []

    def test_searches_among_given_rows_score_them_as_a_full_search_does(self, store, ids):
        """Recall looks a candidate one signal found up in the other: ``among`` narrows the rows, not the
        statistics, so each row's score is the one a full search gives it."""
        word, other = tok("订单"), tok("发票")
        events = [self.event(ids, f"e{i}", tokens=[word, tok(f"x{i}")] if i % 2 else [other, tok(f"y{i}")])
                  for i in range(6)]
        store.add(events, rows(*(unit(1, i) for i in range(6))), 2.0, 200)
        query = unit(1, 2)
        full_keyword = dict(store.keyword_search(T, ids("u"), [word, other], None, 10))
        full_vector = dict(store.vector_search(T, ids("u"), query, None, 10))
        among = [ids("e0"), ids("e3"), ids("e4")]
        keyword = dict(store.keyword_search(T, ids("u"), [word, other], None, 10, among=among))
        vector = dict(store.vector_search(T, ids("u"), query, None, 10, among=among))
        assert set(keyword) == set(vector) == set(among)
        assert all(keyword[e] == pytest.approx(full_keyword[e], rel=1e-4) for e in among)
        assert all(vector[e] == pytest.approx(full_vector[e], abs=1e-4) for e in among)
        assert store.keyword_search(T, ids("u"), [word], None, 10, among=[ids("e0")]) == []  # holds no query token
        assert store.vector_search(T, ids("u"), query, None, 10, among=[]) == []

    # --- purposes (``memory.purposes``) -----------------------------------------------------

    def test_searches_see_only_rows_recorded_under_a_grant_asked_for(self, store, ids):
        word = tok("订单")
        store.add([self.event(ids, "tutor", tokens=[word], purposes=["tutoring#1"]),
                   self.event(ids, "both", tokens=[word], purposes=["support#1", "tutoring#1"]),
                   self.event(ids, "old", tokens=[word]),  # recorded before purposes: ANY
                   self.event(ids, "regranted", tokens=[word], purposes=["tutoring#2"])],
                  rows(unit(1), unit(1, 0.2), unit(1, 0.4), unit(1, 0.6)), 0.999, 200)
        user, query = ids("u"), unit(1)

        def found(purposes):
            by_keyword = ids.names(e for e, _ in store.keyword_search(T, user, [word], None, 10, purposes=purposes))
            by_vector = ids.names(e for e, _ in store.vector_search(T, user, query, None, 10, purposes=purposes))
            assert sorted(by_keyword) == sorted(by_vector)
            return sorted(by_vector)

        assert found(None) == ["both", "old", "regranted", "tutor"]
        assert found(["support#1"]) == ["both"]
        assert found(["tutoring#1", ANY]) == ["both", "old", "tutor"]
        assert found(["tutoring#2"]) == ["regranted"]  # the grant after a withdrawal sees none of the first's
        assert found(["tutoring#12"]) == []  # a token is matched whole
        assert found([]) == []
        assert {e.event_id: e.purposes for e in store.get(T, user, [ids("both"), ids("old")])} == {
            ids("both"): ["support#1", "tutoring#1"], ids("old"): [ANY]}

    def test_events_merge_only_with_events_collected_under_the_same_grants(self, store, ids):
        report = store.add([self.event(ids, "a", purposes=["tutoring#1"]),
                            self.event(ids, "b", purposes=["support#1", "tutoring#1"]),
                            self.event(ids, "c", purposes=["tutoring#1"])],
                           rows(unit(1), unit(1), unit(1)), 0.9, 200)
        assert ids.names(report.inserted) == ["a", "b"]
        assert {ids.names([k])[0]: ids.names([v])[0] for k, v in report.merged.items()} == {"c": "a"}

    def test_over_the_cap_only_events_of_the_same_grants_consolidate(self, store, ids):
        store.add([self.event(ids, "a", purposes=["tutoring#1"]), self.event(ids, "b", purposes=["support#1"])],
                  rows(unit(1), unit(1, 0.05)), 0.999, 200)
        report = store.consolidate(T, ids("u"), cap=1, consolidate_threshold=0.8)
        assert not report.consolidated and len(report.evicted) == 1  # similar, but not the same purposes

    # --- page: listing a user's memory -------------------------------------------------------

    def test_page_lists_a_users_rows_newest_first_after_a_cursor_and_by_message(self, store, ids):
        store.add([self.event(ids, name, ts=ts, message_ids=[f"m-{name}"], kind=kind)
                   for name, ts, kind in [("a", 1.0, EventType.question), ("b", 3.0, EventType.preference),
                                          ("c", 3.0, EventType.question), ("d", 2.0, EventType.question)]]
                  + [self.event(ids, "theirs", user="other", ts=5.0)],
                  rows(unit(1), unit(0, 1), unit(0, 0, 1), unit(0, 0, 0, 1), unit(1)), 0.999, 200)
        user = ids("u")
        every = store.page(T, user, limit=10)
        assert ids.names(e.event_id for e in every) == sorted(["c", "b"], key=ids, reverse=True) + ["d", "a"]
        first = store.page(T, user, limit=2)
        rest = store.page(T, user, before=(first[-1].ts, first[-1].event_id), limit=10)
        assert [e.event_id for e in first + rest] == [e.event_id for e in every]  # no row twice, none missed
        assert ids.names(e.event_id for e in store.page(T, user, types={EventType.preference})) == ["b"]
        assert ids.names(e.event_id for e in store.page(T, user, message_ids=["m-a", "m-d", "m-z"])) == ["d", "a"]
        assert store.page(T, user, message_ids=["m-"]) == []  # an id is matched whole
        assert store.page(T, user, message_ids=[]) == [] and store.page(T, ids("nobody")) == []

    def test_page_by_message_names_the_session_when_asked(self, store, ids):
        """Clients number messages per session: "m-1" of one session is another message than "m-1" of the next."""
        store.add([self.event(ids, name, ts=ts, message_ids=["m-1"], session=session)
                   for name, ts, session in [("first", 1.0, "s-1"), ("second", 2.0, "s-2"), ("other", 3.0, "s-2")]],
                  rows(unit(1), unit(0, 1), unit(0, 0, 1)), 0.999, 200)
        user = ids("u")
        assert ids.names(e.event_id for e in store.page(T, user, message_ids=["m-1"])) == ["other", "second", "first"]
        assert ids.names(e.event_id for e in store.page(T, user, message_ids=["m-1"], session_id="s-1")) == ["first"]
        assert ids.names(e.event_id for e in store.page(T, user, session_id="s-2", limit=1)) == ["other"]
        assert store.page(T, user, session_id="s-3") == []

    # --- get, live_count, ping --------------------------------------------------------------

    def test_get_returns_what_exists_in_the_order_asked(self, store, ids):
        a = self.event(ids, "a", kind=EventType.goal, role=Role.assistant, ts=1764474000.25, conf=0.65,
                       weight=0.5, sealed=bytes(range(256)), message_ids=["m-1", "m-2"])
        b = self.event(ids, "b", kind=EventType.preference)
        store.add([a, b, self.event(ids, "theirs", user="other")], rows(unit(1), unit(0, 1), unit(1)), 0.99, 200)
        got = store.get(T, ids("u"), [ids("b"), ids("missing"), ids("theirs"), ids("a")])
        assert ids.names(e.event_id for e in got) == ["b", "a"]
        assert got[1].model_dump(exclude={"tokens"}) == a.model_dump(exclude={"tokens"})
        assert store.get(T, ids("u"), []) == [] and store.get(T, ids("nobody"), [ids("a")]) == []

    def test_live_count_counts_live_events_of_one_user(self, store, ids):
        assert store.live_count(T, ids("u")) == 0
        store.add([self.event(ids, f"e{i}", kind=EventType.statement) for i in range(3)],
                  rows(unit(1), unit(0, 1), unit(0, 0, 1)), 0.99, 2)
        assert store.live_count(T, ids("u")) == 2 and store.live_count(T, ids("other")) == 0

    def test_ping_answers_when_the_backend_is_up(self, store):
        assert store.ping() is None

    # --- maintenance primitives: dump, delete, update, users -------------------------------------

    def test_dump_returns_events_with_their_vectors_oldest_first_and_filters(self, store, ids):
        events = [self.event(ids, "new", ts=30.0, kind=EventType.greeting),
                  self.event(ids, "old", ts=10.0, kind=EventType.greeting),
                  self.event(ids, "mid", ts=20.0, kind=EventType.question)]
        vectors = rows(unit(1, 0), unit(0, 1), unit(1, 1))
        store.add(events, vectors, 0.999, 200)
        user = ids("u")
        dumped = store.dump(T, user)
        assert ids.names(e.event_id for e, _ in dumped) == ["old", "mid", "new"]
        by_id = {e.event_id: v for e, v in dumped}
        assert np.allclose(by_id[ids("old")], unit(0, 1), atol=1e-5)
        assert dumped[0][0].sealed == b"opaque" and dumped[0][0].message_ids == ["m-old"]
        greetings = store.dump(T, user, types={EventType.greeting}, before_ts=25.0)
        assert ids.names(e.event_id for e, _ in greetings) == ["old"]
        assert store.dump(T, ids("nobody")) == []

    def test_delete_removes_events_from_search_with_what_they_absorbed(self, store, ids):
        store.add([self.event(ids, "a", tokens=[tok("x")])], rows(unit(1, 0)), 0.9, 200)
        store.add([self.event(ids, "a2", tokens=[tok("x")])], rows(unit(1, 0)), 0.9, 200)  # merges into a
        user = ids("u")
        assert store.delete(T, user, [ids("a"), ids("missing")]) == 2
        assert store.get(T, user, [ids("a")]) == [] and store.live_count(T, user) == 0
        assert store.keyword_search(T, user, [tok("x")], None, 5) == []
        assert store.vector_search(T, user, unit(1, 0), None, 5) == []
        report = store.add([self.event(ids, "a2", tokens=[tok("x")])], rows(unit(1, 0)), 0.9, 200)
        assert ids.names(report.inserted) == ["a2"]  # it went with the event that absorbed it
        assert store.delete(T, user, []) == 0

    def test_update_sets_weight_noise_and_status_only(self, store, ids):
        store.add([self.event(ids, "a"), self.event(ids, "b")], rows(unit(1, 0), unit(0, 1)), 0.999, 200)
        user = ids("u")
        assert store.update(T, user, [ids("a")], weight=1.5, noise=0.3) == 1
        [a] = store.get(T, user, [ids("a")])
        assert (a.weight, a.noise) == (pytest.approx(1.5), pytest.approx(0.3))
        store.update(T, user, [ids("b")], status=EVICTED)
        assert ids.names(e for e, _ in store.vector_search(T, user, unit(1, 1), None, 5, (LIVE,))) == ["a"]
        with pytest.raises(ValueError):
            store.update(T, user, [ids("a")], confidence=1.0)

    def test_users_lists_every_user_with_events_in_order_and_pages(self, store, ids):
        for name in ("u1", "u2", "u3"):
            store.add([self.event(ids, f"e-{name}", user=name)], rows(unit(1, 0)), 0.999, 200)
        mine = sorted((T, ids(n)) for n in ("u1", "u2", "u3"))
        seen, after = [], ("", "")
        while True:
            page = store.users(after, 2)
            if not page:
                break
            seen += page
            after = page[-1]
        assert [u for u in seen if u in mine] == mine and seen == sorted(seen)

    # --- retract: a message taken back (撤回) -------------------------------------------------------

    def test_retract_removes_a_messages_rows_and_nothing_another_message_said(self, store, ids):
        refund = unit(1, 0.05)
        for name, ts in (("r0", 10.0), ("r1", 30.0), ("r2", 20.0)):  # "怎么退款" ×3, merged into r0
            store.add([self.event(ids, name, tokens=[tok("退款"), tok("refund")], ts=ts)], rows(refund), 0.9, 200)
        store.add([self.event(ids, "theirs", user="other", message_ids=["m-r1"])], rows(refund), 0.9, 200)
        user = ids("u")
        assert store.retract(T, user, Messages.of_session("s", ["m-r1", "m-missing"])) == 1
        [head, kept] = store.get(T, user, [ids("r0"), ids("r2")])
        assert (head.status, head.count, head.message_ids, head.ts) == (LIVE, 2, ["m-r0", "m-r2"], 20.0)
        assert (kept.status, kept.canonical_id) == (MERGED, ids("r0"))
        assert store.get(T, user, [ids("r1")]) == []
        assert sorted(ids.names(e for e, _ in store.keyword_search(T, user, [tok("退款")], None, 10))) == ["r0", "r2"]
        assert len(store.vector_search(T, user, refund, None, 10)) == 2
        assert store.get(T, ids("other"), [ids("theirs")])  # another user's row with the same message id stays
        assert store.retract(T, user, Messages.of_session("s", ["m-r1"])) == 0  # again: nothing changes
        assert store.get(T, user, [ids("r0"), ids("r2")]) == [head, kept]

    def test_retract_takes_a_message_of_its_session_not_the_same_id_of_another(self, store, ids):
        physics = unit(1, 0.05)  # session "s" and session "s2" both number their first message m-1
        store.add([self.event(ids, "a", kind=EventType.preference, message_ids=["m-1"], ts=10.0)], rows(physics),
                  0.9, 200)
        store.add([self.event(ids, "b", kind=EventType.preference, message_ids=["m-1"], ts=20.0, session="s2")],
                  rows(physics), 0.9, 200)  # merged into a
        user = ids("u")
        assert store.retract(T, user, Messages.of_session("s2", ["m-1"])) == 1
        [head] = store.get(T, user, [ids("a")])
        assert (head.status, head.count, head.message_ids, head.ts) == (LIVE, 1, ["m-1"], 10.0)
        assert store.get(T, user, [ids("b")]) == []
        store.add([self.event(ids, "c", kind=EventType.preference, message_ids=["m-1"], ts=30.0, session="s3")],
                  rows(physics), 0.9, 200)  # merged into a
        assert store.retract(T, user, Messages.of_session("s", ["m-1"])) == 1  # a's own: c takes the event on
        [heir] = store.get(T, user, [ids("c")])
        assert (heir.status, heir.canonical_id, heir.count, heir.message_ids) == (LIVE, None, 1, ["m-1"])

    def test_retracting_the_message_an_event_was_made_from_hands_the_event_to_the_newest_absorbed_row(
            self, store, ids):
        for name, ts in (("e0", 10.0), ("e1", 30.0), ("e2", 20.0)):  # "I like physics" ×3, merged into e0
            store.add([self.event(ids, name, kind=EventType.preference, tokens=[tok("physics")], ts=ts)],
                      rows(unit(1)), 0.9, 200)
        user = ids("u")
        assert store.retract(T, user, Messages.of_session("s", ["m-e0"])) == 1
        assert store.get(T, user, [ids("e0")]) == [] and store.live_count(T, user) == 1
        [heir, other] = store.get(T, user, [ids("e1"), ids("e2")])
        assert (heir.status, heir.canonical_id, heir.count, heir.message_ids) == (LIVE, None, 2, ["m-e1", "m-e2"])
        assert heir.ts == 30.0 and (other.status, other.canonical_id) == (MERGED, ids("e1"))
        assert ids.names(e for e, _ in store.vector_search(T, user, unit(1), None, 5, (LIVE,))) == ["e1"]
        report = store.add([self.event(ids, "e3", kind=EventType.preference)], rows(unit(1)), 0.9, 200)
        assert report.merged == {ids("e3"): ids("e1")}  # the heir absorbs what comes next
        assert store.retract(T, user, Messages.of_session("s", ["m-e1", "m-e2", "m-e3"])) == 3
        assert store.live_count(T, user) == 0 and store.vector_search(T, user, unit(1), None, 5) == []

    def test_retract_keeps_a_consolidated_event_consistent(self, store, ids):
        now = time.time()
        a, b = unit(1, 0.6), unit(1, 0.0)  # consolidated over the cap: a into b
        store.add([self.event(ids, "a", kind=EventType.statement, ts=now),
                   self.event(ids, "b", kind=EventType.statement, ts=now),
                   self.event(ids, "c", kind=EventType.statement, ts=now)],
                  rows(a, b, unit(0, 0, 1)), 0.9, 2, consolidate_threshold=0.8)
        user = ids("u")
        assert store.retract(T, user, Messages.of_session("s", ["m-a"])) == 1
        [kept] = store.get(T, user, [ids("b")])
        assert (kept.count, kept.message_ids, kept.status) == (1, ["m-b"], LIVE)
        assert store.retract(T, user, Messages.of_session("s", ["m-b"])) == 1 and store.get(T, user, [ids("b")]) == []
        assert ids.names(e for e, _ in store.vector_search(T, user, unit(1), None, 5)) == ["c"]

    # --- strip_content: a user who became a child ------------------------------------------------

    def test_strip_content_leaves_every_row_of_the_user_type_only_and_keeps_its_metadata(self, store, ids):
        now = time.time()
        refund = unit(1, 0.05)
        store.add([self.event(ids, "r0", tokens=[tok("退款"), tok("refund")], ts=now, sealed="我想退款".encode())],
                  rows(refund), 0.9, 200)
        store.add([self.event(ids, "r1", tokens=[tok("退款")], ts=now + 1)], rows(refund), 0.9, 200)  # merged
        store.add([self.event(ids, "a", kind=EventType.statement, tokens=[tok("maths")], ts=now),  # evicted
                   self.event(ids, "b", kind=EventType.preference, tokens=[tok("physics")], ts=now)],
                  rows(unit(0, 1), unit(0, 0, 1)), 0.9, 2)
        store.add([self.event(ids, "theirs", user="other", tokens=[tok("退款")])], rows(refund), 0.9, 200)
        user, names = ids("u"), ["r0", "r1", "a", "b"]
        before = store.get(T, user, [ids(n) for n in names])
        assert {e.status for e in before} == {LIVE, MERGED, EVICTED}

        assert store.strip_content(T, user, lambda event_id: b"none:" + event_id.encode(), "en") == 4
        after = store.get(T, user, [ids(n) for n in names])
        assert [e.sealed for e in after] == [b"none:" + ids(n).encode() for n in names]
        assert all(e.lang == "en" and e.tokens == [] for e in after)
        kept = {"sealed", "lang", "tokens"}
        assert [e.model_dump(exclude=kept) for e in after] == [e.model_dump(exclude=kept) for e in before]
        for word in ("退款", "refund", "maths", "physics"):
            assert store.keyword_search(T, user, [tok(word)], None, 10) == []
        dumped = store.dump(T, user, statuses=(LIVE, MERGED, EVICTED))
        assert len(dumped) == 4 and all(not np.any(v) for _, v in dumped)  # nothing of the content is embedded

        assert ids.names(e for e, _ in store.keyword_search(T, ids("other"), [tok("退款")], None, 5)) == ["theirs"]
        [(theirs, vector)] = store.dump(T, ids("other"))
        assert theirs.sealed == b"opaque" and np.allclose(vector, refund, atol=1e-5)
        assert store.strip_content(T, user, lambda event_id: b"none:" + event_id.encode(), "en") == 4  # again
        assert store.get(T, user, [ids(n) for n in names]) == after
        assert store.strip_content(T, ids("nobody"), lambda event_id: b"", "en") == 0
