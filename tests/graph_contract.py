"""The graph store contract (``memory.graph``), written once and run against every adapter.

A backend's test module subclasses :class:`GraphContract` and provides a ``store`` fixture. Tests never
assume an empty backend: every tenant, user and evidence id comes from ``fresh_ids``, so one server can
be shared by all tests (and by several runs); ``scan`` is checked on the rows a test made itself.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

import pytest

from memory import ids as mneme_ids
from memory.graph import (
    Evidence,
    GraphStore,
    MergeMode,
    RelationKey,
    Status,
    StoredRelation,
)
from memory.models import FactSource, Relation

BLEND, MAX, HUMAN = MergeMode.blend, MergeMode.max, MergeMode.human
RULE, LLM, PERSON, COUNTER = FactSource.rule, FactSource.llm, FactSource.human, FactSource.counter_evidence


class FreshIds:
    """Short names → ids unique to one test: ``ids("u")`` is the same id each time within a test."""

    def __init__(self) -> None:
        self._suffix = "-" + uuid.uuid4().hex[:12]

    def __call__(self, name: str) -> str:
        return name + self._suffix

    def names(self, values: Iterable[str]) -> list[str]:
        return [v.removesuffix(self._suffix) for v in values]


class GraphContract:
    """Subclass and provide ``store``; every test here then runs against that adapter."""

    @pytest.fixture
    def store(self) -> GraphStore:
        raise NotImplementedError("a backend's test class provides the store fixture")

    @pytest.fixture
    def ids(self) -> FreshIds:
        return FreshIds()

    # --- helpers ----------------------------------------------------------------------------

    @staticmethod
    def key(ids: FreshIds, obj: str, relation: Relation = Relation.likes, user: str = "u",
            tenant: str = "t") -> RelationKey:
        tenant = ids(tenant)
        return RelationKey(tenant=tenant, user_id=ids(user), relation=relation,
                           concept_id=mneme_ids.concept_id(tenant, obj), object=obj)

    @staticmethod
    def ev(ids: FreshIds, name: str, confidence: float = 0.5, source: FactSource = RULE,
           message_ids: Sequence[str] | None = None, device_id: str | None = None, session_id: str | None = None,
           ts: float = 1_764_474_000.25, note: str = "") -> Evidence:
        return Evidence(evidence_id=ids(name), source=source, confidence=confidence,
                        message_ids=list(message_ids if message_ids is not None else [f"m-{name}"]),
                        device_id=device_id, session_id=session_id, ts=ts, note=note)

    @staticmethod
    def rel_id(key: RelationKey) -> str:
        return mneme_ids.relation_id(key.tenant, key.user_id, key.relation, key.concept_id)

    @staticmethod
    def one(store: GraphStore, key: RelationKey, statuses: Sequence[Status] = tuple(Status)) -> StoredRelation:
        [rel] = [r for r in store.relations(key.tenant, key.user_id, statuses=statuses)
                 if r.rel_id == GraphContract.rel_id(key)]
        return rel

    # --- merge: arithmetic ------------------------------------------------------------------

    def test_a_new_relation_starts_at_the_evidence_confidence(self, store, ids):
        key = self.key(ids, "physics")
        start = time.time()
        change = store.merge(key, self.ev(ids, "e1", 0.6), BLEND)
        end = time.time()
        assert change.model_dump() == {
            "tenant": key.tenant, "user_id": key.user_id, "rel_id": self.rel_id(key), "relation": "likes",
            "object": "physics", "source": RULE, "evidence_id": ids("e1"), "action": "merge:blend", "before": None,
            "after": pytest.approx(0.6)}
        [rel] = store.relations(key.tenant, key.user_id)
        assert rel.model_dump(exclude={"confidence", "created_at", "updated_at", "base_ts"}) == {
            "rel_id": self.rel_id(key), "tenant": key.tenant, "user_id": key.user_id, "relation": Relation.likes,
            "concept_id": key.concept_id, "object": "physics", "source": RULE, "status": Status.active}
        assert rel.confidence == pytest.approx(0.6)
        assert start <= rel.created_at == rel.updated_at == rel.base_ts <= end

    @pytest.mark.parametrize("mode", list(MergeMode))
    def test_every_mode_starts_a_new_relation_at_the_evidence_confidence(self, store, ids, mode):
        key = self.key(ids, "math")
        source = PERSON if mode is HUMAN else RULE
        change = store.merge(key, self.ev(ids, "e1", 0.35, source), mode)
        assert (change.action, change.before, change.after) == (f"merge:{mode.value}", None, pytest.approx(0.35))
        assert self.one(store, key).source is source

    def test_blend_is_three_tenths_old_plus_seven_tenths_new(self, store, ids):
        key = self.key(ids, "物理")
        store.merge(key, self.ev(ids, "e1", 0.5), BLEND)
        second = store.merge(key, self.ev(ids, "e2", 0.9, LLM), BLEND)
        assert (second.before, second.after) == (pytest.approx(0.5), pytest.approx(0.3 * 0.5 + 0.7 * 0.9))
        third = store.merge(key, self.ev(ids, "e3", 0.2), BLEND)
        expected = 0.3 * (0.3 * 0.5 + 0.7 * 0.9) + 0.7 * 0.2
        assert (third.before, third.after) == (pytest.approx(0.78), pytest.approx(expected))
        rel = self.one(store, key)
        assert rel.confidence == pytest.approx(expected) and rel.source is RULE  # the latest evidence's source

    def test_max_keeps_the_higher_of_old_and_new(self, store, ids):
        key = self.key(ids, "chemistry")
        store.merge(key, self.ev(ids, "e1", 0.6), BLEND)
        lower = store.merge(key, self.ev(ids, "e2", 0.4, LLM), MAX)
        assert (lower.action, lower.before, lower.after) == ("merge:max", pytest.approx(0.6), pytest.approx(0.6))
        assert self.one(store, key).source is LLM  # applied (not ignored): the source follows the evidence
        higher = store.merge(key, self.ev(ids, "e3", 0.8), MAX)
        assert (higher.before, higher.after) == (pytest.approx(0.6), pytest.approx(0.8))
        assert self.one(store, key).confidence == pytest.approx(0.8)

    def test_human_sets_the_value_whatever_it_was(self, store, ids):
        key = self.key(ids, "history")
        store.merge(key, self.ev(ids, "e1", 0.9), BLEND)
        change = store.merge(key, self.ev(ids, "h1", 0.3, PERSON), HUMAN)
        assert (change.action, change.source, change.before, change.after) == (
            "merge:human", PERSON, pytest.approx(0.9), pytest.approx(0.3))
        rel = self.one(store, key)
        assert (rel.confidence, rel.source, rel.status) == (pytest.approx(0.3), PERSON, Status.active)

    def test_human_mode_makes_the_belief_human_whatever_the_evidence_says(self, store, ids):
        key = self.key(ids, "geometry")
        change = store.merge(key, self.ev(ids, "h1", 0.8, RULE), HUMAN)
        assert change.action == "merge:human" and self.one(store, key).source is PERSON

    def test_fresh_evidence_brings_a_retired_relation_back(self, store, ids):
        key = self.key(ids, "drawing")
        store.merge(key, self.ev(ids, "e1", 0.6), BLEND)
        store.set_status(self.rel_id(key), Status.retired, self.ev(ids, "decay", 0.05, note="decayed"))
        assert store.relations(key.tenant, key.user_id) == []
        store.merge(key, self.ev(ids, "e2", 0.8), BLEND)
        rel = self.one(store, key)
        assert rel.status is Status.active and rel.confidence == pytest.approx(0.3 * 0.6 + 0.7 * 0.8)

    def test_confidence_is_clamped_to_a_tenth_and_one(self, store, ids):
        low = self.key(ids, "low")
        assert store.merge(low, self.ev(ids, "e1", 0.05), BLEND).after == pytest.approx(0.1)
        assert store.merge(low, self.ev(ids, "e2", 0.0), BLEND).after == pytest.approx(0.1)  # 0.03 → 0.1
        assert store.merge(low, self.ev(ids, "e3", 0.0), MAX).after == pytest.approx(0.1)
        assert store.merge(low, self.ev(ids, "h1", 0.0, PERSON), HUMAN).after == pytest.approx(0.1)
        floor = self.key(ids, "floor")
        store.merge(floor, self.ev(ids, "e1", 0.15), BLEND)
        assert store.scale(self.rel_id(floor), self.ev(ids, "c1", source=COUNTER), 0.5).after == pytest.approx(0.1)
        high = self.key(ids, "high")
        store.merge(high, self.ev(ids, "e1", 1.0), BLEND)
        assert store.merge(high, self.ev(ids, "e2", 1.0), BLEND).after == pytest.approx(1.0)
        assert store.scale(self.rel_id(high), self.ev(ids, "c1", source=COUNTER), 3.0).after == pytest.approx(1.0)
        for key, expected in ((low, 0.1), (floor, 0.1), (high, 1.0)):
            assert self.one(store, key).confidence == pytest.approx(expected)

    def test_a_merge_restarts_the_decay_clock_and_keeps_created_at(self, store, ids):
        key = self.key(ids, "biology")
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        first = self.one(store, key)
        assert store.materialise(first.rel_id, 0.5, first.base_ts - 86_400, first.updated_at)
        time.sleep(0.002)
        store.merge(key, self.ev(ids, "e2", 0.8), BLEND)
        now = self.one(store, key)
        assert now.created_at == first.created_at
        assert now.updated_at == now.base_ts > first.updated_at
        assert now.confidence == pytest.approx(0.3 * 0.5 + 0.7 * 0.8)  # from the materialised value

    def test_the_object_and_concept_of_a_relation_are_fixed_when_it_is_made(self, store, ids):
        key = self.key(ids, "Physics")
        store.merge(key, self.ev(ids, "e1", 0.5), BLEND)
        respelt = key.model_copy(update={"object": "physics "})  # same concept id, other spelling
        change = store.merge(respelt, self.ev(ids, "e2", 0.5), BLEND)
        assert change.rel_id == self.rel_id(key) and change.object == "Physics"
        assert [r.object for r in store.relations(key.tenant, key.user_id)] == ["Physics"]

    # --- merge: once per evidence -------------------------------------------------------------

    def test_the_same_evidence_again_changes_nothing_and_returns_the_first_change(self, store, ids):
        key = self.key(ids, "physics")
        first = store.merge(key, self.ev(ids, "e1", 0.5), BLEND)
        store.merge(key, self.ev(ids, "e2", 0.9), BLEND)
        before = self.one(store, key)
        for mode in MergeMode:  # whatever else the repeat says
            again = store.merge(key, self.ev(ids, "e1", 0.1, PERSON if mode is HUMAN else LLM), mode)
            assert again == first and (again.before, again.after) == (None, pytest.approx(0.5))
        assert self.one(store, key) == before
        assert ids.names(r.evidence_id for r in store.evidence([before.rel_id])) == ["e1", "e2"]

    def test_the_same_evidence_id_applies_once_to_each_relation(self, store, ids):
        likes, goal = self.key(ids, "math"), self.key(ids, "math", Relation.goal)
        a = store.merge(likes, self.ev(ids, "e1", 0.4), BLEND)
        b = store.merge(goal, self.ev(ids, "e1", 0.7), BLEND)
        assert (a.rel_id, a.after) == (self.rel_id(likes), pytest.approx(0.4))
        assert (b.rel_id, b.after) == (self.rel_id(goal), pytest.approx(0.7))
        assert len(store.evidence([a.rel_id, b.rel_id])) == 2

    def test_an_evidence_id_is_once_per_relation_across_primitives(self, store, ids):
        key = self.key(ids, "music")
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        counter = store.scale(self.rel_id(key), self.ev(ids, "x", source=COUNTER), 0.5)
        assert counter.action == "counter" and counter.after == pytest.approx(0.4)
        assert store.merge(key, self.ev(ids, "x", 0.9), BLEND) == counter
        assert store.set_status(self.rel_id(key), Status.retired, self.ev(ids, "x")) == counter
        assert store.scale(self.rel_id(key), self.ev(ids, "x", source=COUNTER), 0.5) == counter
        rel = self.one(store, key)
        assert (rel.confidence, rel.status) == (pytest.approx(0.4), Status.active)

    # --- merge: human corrections win ---------------------------------------------------------

    @pytest.mark.parametrize("mode", [BLEND, MAX])
    @pytest.mark.parametrize("source", [RULE, LLM])
    def test_rule_and_llm_evidence_cannot_move_a_human_belief(self, store, ids, mode, source):
        key = self.key(ids, "art")
        store.merge(key, self.ev(ids, "h1", 0.3, PERSON), HUMAN)
        before = self.one(store, key)
        change = store.merge(key, self.ev(ids, "e1", 0.9, source), mode)
        assert (change.action, change.source, change.before, change.after) == (
            "ignored", source, pytest.approx(0.3), pytest.approx(0.3))
        assert self.one(store, key) == before  # nothing moved: not the value, the source nor the clocks
        rows = store.evidence([before.rel_id])
        assert [(r.action, r.source) for r in rows] == [("merge:human", PERSON), ("ignored", source)]
        assert store.merge(key, self.ev(ids, "e1", 0.9, source), mode) == change  # recorded once

    def test_a_human_can_change_a_human_belief(self, store, ids):
        key = self.key(ids, "art")
        store.merge(key, self.ev(ids, "h1", 0.3, PERSON), HUMAN)
        assert store.merge(key, self.ev(ids, "h2", 0.9, PERSON), HUMAN).after == pytest.approx(0.9)
        assert store.merge(key, self.ev(ids, "h3", 0.5, PERSON), BLEND).after == pytest.approx(0.3 * 0.9 + 0.7 * 0.5)

    def test_a_human_deletion_outlasts_rule_evidence_and_a_human_merge_restores_it(self, store, ids):
        key = self.key(ids, "dance")
        store.merge(key, self.ev(ids, "e1", 0.7), BLEND)
        store.set_status(self.rel_id(key), Status.deleted, self.ev(ids, "d1", 0.0, PERSON))
        ignored = store.merge(key, self.ev(ids, "e2", 0.9, LLM), BLEND)
        assert (ignored.action, ignored.before, ignored.after) == ("ignored", pytest.approx(0.7), pytest.approx(0.7))
        assert store.relations(key.tenant, key.user_id) == []
        deleted = self.one(store, key, [Status.deleted])
        assert (deleted.status, deleted.source, deleted.confidence) == (Status.deleted, PERSON, pytest.approx(0.7))
        restored = store.merge(key, self.ev(ids, "h1", 0.6, PERSON), HUMAN)
        assert (restored.action, restored.before, restored.after) == (
            "merge:human", pytest.approx(0.7), pytest.approx(0.6))
        [rel] = store.relations(key.tenant, key.user_id)
        assert (rel.status, rel.source, rel.confidence) == (Status.active, PERSON, pytest.approx(0.6))

    # --- scale: counter-evidence ------------------------------------------------------------

    def test_counter_evidence_multiplies_an_active_relation(self, store, ids):
        key = self.key(ids, "17", Relation.age)
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        before = self.one(store, key)
        time.sleep(0.002)
        change = store.scale(before.rel_id, self.ev(ids, "c1", 0.9, COUNTER, note="newer age"), 0.5)
        assert change.model_dump() == {
            "tenant": key.tenant, "user_id": key.user_id, "rel_id": before.rel_id, "relation": "age", "object": "17",
            "source": COUNTER, "evidence_id": ids("c1"), "action": "counter", "before": pytest.approx(0.8),
            "after": pytest.approx(0.4)}
        after = self.one(store, key)
        assert (after.confidence, after.source, after.status) == (pytest.approx(0.4), COUNTER, Status.active)
        assert after.updated_at > before.updated_at
        assert after.base_ts == before.base_ts  # counter-evidence is not fresh evidence: the decay clock runs on
        row = store.evidence([before.rel_id])[-1]
        assert (row.action, row.note, row.confidence) == ("counter", "newer age", pytest.approx(0.9))

    def test_counter_evidence_applies_once_per_evidence_id(self, store, ids):
        key = self.key(ids, "18", Relation.age)
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        first = store.scale(self.rel_id(key), self.ev(ids, "c1", source=COUNTER), 0.5)
        again = store.scale(self.rel_id(key), self.ev(ids, "c1", source=COUNTER), 0.5)
        assert again == first and self.one(store, key).confidence == pytest.approx(0.4)
        assert store.scale(self.rel_id(key), self.ev(ids, "c2", source=COUNTER), 0.5).after == pytest.approx(0.2)

    def test_counter_evidence_for_a_missing_or_inactive_relation_is_none(self, store, ids):
        gone, old = self.key(ids, "gone"), self.key(ids, "old")
        store.merge(gone, self.ev(ids, "e1", 0.8), BLEND)
        store.merge(old, self.ev(ids, "e1", 0.8), BLEND)
        store.set_status(self.rel_id(gone), Status.deleted, self.ev(ids, "d1", 0.0, PERSON))
        store.set_status(self.rel_id(old), Status.retired, self.ev(ids, "r1"))
        missing = self.rel_id(self.key(ids, "never"))
        for rel_id in (self.rel_id(gone), self.rel_id(old), missing):
            assert store.scale(rel_id, self.ev(ids, "c1", source=COUNTER), 0.5) is None
        rows = store.evidence([self.rel_id(gone), self.rel_id(old), missing])
        assert sorted(ids.names(r.evidence_id for r in rows)) == ["d1", "e1", "e1", "r1"]  # nothing recorded
        assert self.one(store, gone).confidence == pytest.approx(0.8)

    def test_counter_evidence_cannot_move_a_human_belief(self, store, ids):
        key = self.key(ids, "小明", Relation.name)
        store.merge(key, self.ev(ids, "h1", 0.9, PERSON), HUMAN)
        before = self.one(store, key)
        change = store.scale(before.rel_id, self.ev(ids, "c1", source=COUNTER), 0.5)
        assert (change.action, change.before, change.after) == ("ignored", pytest.approx(0.9), pytest.approx(0.9))
        assert self.one(store, key) == before
        assert store.scale(before.rel_id, self.ev(ids, "c1", source=COUNTER), 0.5) == change

    # --- rescore --------------------------------------------------------------------------

    def test_a_rescore_sets_what_the_remaining_evidence_gives_and_shows_the_step(self, store, ids):
        key = self.key(ids, "chess")
        store.merge(key, self.ev(ids, "e1", 0.5), BLEND)
        store.merge(key, self.ev(ids, "e2", 0.9), BLEND)  # 0.3 × 0.5 + 0.7 × 0.9 = 0.78
        merged = self.one(store, key)
        assert store.materialise(merged.rel_id, merged.confidence, merged.base_ts - 86_400, merged.updated_at)
        before = self.one(store, key)  # its decay clock a day back, as the nightly decay may leave it
        change = store.rescore(before.rel_id, 0.5, self.ev(ids, "x1", 0.0, COUNTER, ["m-e2"], note="m-e2 gone"))
        assert (change.action, change.before, change.after) == ("rescore", pytest.approx(0.78), pytest.approx(0.5))
        after = self.one(store, key)
        assert (after.confidence, after.status, after.source) == (pytest.approx(0.5), Status.active, before.source)
        assert after.base_ts > before.base_ts and after.updated_at > before.updated_at  # the decay clock restarts
        steps = [(r.action, r.before, r.after, r.note) for r in store.evidence([before.rel_id])][-1]
        assert steps == ("rescore", pytest.approx(0.78), pytest.approx(0.5), "m-e2 gone")

    def test_a_rescore_is_once_per_evidence_and_none_for_a_missing_relation(self, store, ids):
        key = self.key(ids, "go")
        assert store.rescore(self.rel_id(key), 0.4, self.ev(ids, "x1")) is None
        assert store.evidence([self.rel_id(key)]) == []
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        first = store.rescore(self.rel_id(key), 0.4, self.ev(ids, "x1"))
        assert store.rescore(self.rel_id(key), 0.2, self.ev(ids, "x1")) == first
        assert self.one(store, key).confidence == pytest.approx(0.4)
        assert store.rescore(self.rel_id(key), 0.0, self.ev(ids, "x2")).after == pytest.approx(0.1)  # the floor

    # --- set_status -----------------------------------------------------------------------

    def test_a_deleted_relation_leaves_recall_but_keeps_its_evidence(self, store, ids):
        key, other = self.key(ids, "games"), self.key(ids, "books")
        store.merge(key, self.ev(ids, "e1", 0.7), BLEND)
        store.merge(other, self.ev(ids, "e1", 0.6), BLEND)
        change = store.set_status(self.rel_id(key), Status.deleted, self.ev(ids, "d1", 0.0, PERSON, note="by op"))
        assert change.model_dump() == {
            "tenant": key.tenant, "user_id": key.user_id, "rel_id": self.rel_id(key), "relation": "likes",
            "object": "games", "source": PERSON, "evidence_id": ids("d1"), "action": "delete",
            "before": pytest.approx(0.7), "after": pytest.approx(0.7)}
        assert [r.object for r in store.relations(key.tenant, key.user_id)] == ["books"]
        [deleted] = store.relations(key.tenant, key.user_id, statuses=[Status.deleted])
        assert (deleted.object, deleted.status, deleted.source) == ("games", Status.deleted, PERSON)
        assert [(r.action, r.note) for r in store.evidence([deleted.rel_id])] == [("merge:blend", ""),
                                                                                 ("delete", "by op")]

    def test_a_retired_relation_keeps_its_source(self, store, ids):
        key, other = self.key(ids, "running"), self.key(ids, "swimming")
        store.merge(key, self.ev(ids, "e1", 0.7, LLM), BLEND)
        store.merge(other, self.ev(ids, "e1", 0.6), BLEND)
        before = self.one(store, key)
        time.sleep(0.002)
        change = store.set_status(before.rel_id, Status.retired, self.ev(ids, "decay", 0.11, note="decayed"))
        assert (change.action, change.before, change.after) == ("retire", pytest.approx(0.7), pytest.approx(0.7))
        [retired] = store.relations(key.tenant, key.user_id, statuses=[Status.retired])
        assert (retired.status, retired.source, retired.confidence) == (Status.retired, LLM, pytest.approx(0.7))
        assert retired.updated_at > before.updated_at and retired.base_ts == before.base_ts
        assert [r.object for r in store.relations(key.tenant, key.user_id)] == ["swimming"]
        everything = store.relations(key.tenant, key.user_id, statuses=list(Status))
        assert sorted(r.object for r in everything) == ["running", "swimming"]

    def test_set_status_is_once_per_evidence_and_none_for_a_missing_relation(self, store, ids):
        key = self.key(ids, "cards")
        assert store.set_status(self.rel_id(key), Status.deleted, self.ev(ids, "d1", 0.0, PERSON)) is None
        assert store.evidence([self.rel_id(key)]) == []
        store.merge(key, self.ev(ids, "e1", 0.7), BLEND)
        first = store.set_status(self.rel_id(key), Status.retired, self.ev(ids, "r1"))
        store.merge(key, self.ev(ids, "h1", 0.5, PERSON), HUMAN)  # a human brings it back
        assert store.set_status(self.rel_id(key), Status.retired, self.ev(ids, "r1")) == first
        assert self.one(store, key).status is Status.active

    def test_a_superseded_relation_keeps_its_value_and_evidence_out_of_recall(self, store, ids):
        old, new = self.key(ids, "17", Relation.age), self.key(ids, "18", Relation.age)
        store.merge(old, self.ev(ids, "e1", 0.9, device_id="pad"), BLEND)
        change = store.set_status(self.rel_id(old), Status.superseded,
                                  self.ev(ids, "e2", 0.9, COUNTER, note="replaced by 18"))
        store.merge(new, self.ev(ids, "e2", 0.9, device_id="pad"), BLEND)
        assert (change.action, change.before, change.after) == ("supersede", pytest.approx(0.9), pytest.approx(0.9))
        assert [r.object for r in store.relations(old.tenant, old.user_id)] == ["18"]
        superseded = self.one(store, old)
        assert (superseded.status, superseded.source, superseded.confidence) == (
            Status.superseded, RULE, pytest.approx(0.9))
        assert [(r.action, r.note) for r in store.evidence([superseded.rel_id])] == [
            ("merge:blend", ""), ("supersede", "replaced by 18")]
        store.merge(old, self.ev(ids, "e3", 0.9), BLEND)  # evidence alone does not bring it back (unlike retired)
        assert self.one(store, old).status is Status.superseded
        back = store.merge(old, self.ev(ids, "e4", 0.5), BLEND, Status.active)  # the caller says it is current
        assert back.after == pytest.approx(0.3 * 0.9 + 0.7 * 0.5)
        assert self.one(store, old).status is Status.active

    def test_a_merge_can_hold_a_claim_in_review_in_the_same_write(self, store, ids):
        key = self.key(ids, "17", Relation.age)
        change = store.merge(key, self.ev(ids, "e1", 0.9, LLM), BLEND, Status.in_review)
        assert (change.action, change.before, change.after) == ("merge:blend", None, pytest.approx(0.9))
        assert store.relations(key.tenant, key.user_id) == []  # never active, not even for a moment
        held = self.one(store, key)
        assert (held.status, held.source, held.confidence) == (Status.in_review, LLM, pytest.approx(0.9))
        assert store.scale(held.rel_id, self.ev(ids, "c1", source=COUNTER), 0.5) is None  # not an active belief
        store.merge(key, self.ev(ids, "e2", 0.5), MAX)  # said again: still waiting
        assert self.one(store, key).status is Status.in_review
        store.merge(key, self.ev(ids, "h1", 0.95, PERSON), HUMAN, Status.in_review)  # a human's word is current
        assert (self.one(store, key).status, self.one(store, key).source) == (Status.active, PERSON)

    def test_rule_evidence_cannot_put_a_human_belief_in_review(self, store, ids):
        key = self.key(ids, "16", Relation.age)
        store.merge(key, self.ev(ids, "h1", 1.0, PERSON), HUMAN)
        before = self.one(store, key)
        change = store.merge(key, self.ev(ids, "e1", 0.9), BLEND, Status.in_review)
        assert change.action == "ignored" and self.one(store, key) == before

    # --- materialise ----------------------------------------------------------------------

    def test_materialise_stores_a_decayed_confidence_and_restarts_the_clock(self, store, ids):
        key = self.key(ids, "tea")
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        rel = self.one(store, key)
        assert store.materialise(rel.rel_id, 0.55, rel.base_ts + 3600.5, rel.updated_at) is True
        now = self.one(store, key)
        assert (now.confidence, now.base_ts) == (pytest.approx(0.55), rel.base_ts + 3600.5)
        assert now.updated_at == rel.updated_at and now.source is RULE  # not an update: a later run may do it again
        assert store.materialise(rel.rel_id, 0.01, rel.base_ts + 7200, rel.updated_at) is True
        assert self.one(store, key).confidence == pytest.approx(0.1)  # clamped
        assert store.evidence([rel.rel_id])[-1].evidence_id == ids("e1")  # no evidence row of its own

    def test_materialise_loses_to_a_merge_in_between(self, store, ids):
        key = self.key(ids, "coffee")
        store.merge(key, self.ev(ids, "e1", 0.8), BLEND)
        seen = self.one(store, key)
        time.sleep(0.002)
        store.merge(key, self.ev(ids, "e2", 0.9), BLEND)
        merged = self.one(store, key)
        assert store.materialise(seen.rel_id, 0.2, seen.base_ts + 10, seen.updated_at) is False
        assert self.one(store, key) == merged
        assert store.materialise(seen.rel_id, 0.2, seen.base_ts + 10, merged.updated_at) is True

    def test_materialise_loses_to_counter_evidence_and_skips_inactive_or_missing_relations(self, store, ids):
        key, gone = self.key(ids, "chess"), self.key(ids, "go")
        for k in (key, gone):
            store.merge(k, self.ev(ids, "e1", 0.8), BLEND)
        seen = self.one(store, key)
        time.sleep(0.002)
        store.scale(seen.rel_id, self.ev(ids, "c1", source=COUNTER), 0.5)
        assert store.materialise(seen.rel_id, 0.2, seen.base_ts + 10, seen.updated_at) is False
        store.set_status(self.rel_id(gone), Status.retired, self.ev(ids, "r1"))
        retired = self.one(store, gone)
        assert store.materialise(retired.rel_id, 0.2, retired.base_ts + 10, retired.updated_at) is False
        assert self.one(store, gone).confidence == pytest.approx(0.8)
        assert store.materialise(self.rel_id(self.key(ids, "none")), 0.2, 1.0, 1.0) is False

    # --- relations -------------------------------------------------------------------------

    def test_relations_are_most_confident_first_then_most_recent(self, store, ids):
        for name, conf in (("a", 0.5), ("b", 0.9), ("c", 0.7), ("d", 0.6), ("e", 0.6)):
            store.merge(self.key(ids, name), self.ev(ids, f"e-{name}", conf), BLEND)
            time.sleep(0.002)
        key = self.key(ids, "a")
        assert [r.object for r in store.relations(key.tenant, key.user_id)] == ["b", "c", "e", "d", "a"]

    def test_relations_filter_by_relation_and_status(self, store, ids):
        likes, dislikes, goal = (self.key(ids, "物理"), self.key(ids, "物理", Relation.dislikes),
                                 self.key(ids, "考上清华", Relation.goal))
        for i, k in enumerate((likes, dislikes, goal)):
            store.merge(k, self.ev(ids, f"e{i}", 0.5 + i / 10), BLEND)
        store.set_status(self.rel_id(goal), Status.retired, self.ev(ids, "r1"))
        t, u = likes.tenant, likes.user_id
        assert [r.relation for r in store.relations(t, u)] == [Relation.dislikes, Relation.likes]
        assert [r.object for r in store.relations(t, u, Relation.likes)] == ["物理"]
        assert store.relations(t, u, Relation.goal) == []
        assert [r.object for r in store.relations(t, u, Relation.goal, [Status.retired])] == ["考上清华"]
        assert store.relations(t, u, Relation.goal, [Status.deleted]) == []
        assert len(store.relations(t, u, statuses=[Status.active, Status.retired])) == 3
        assert store.relations(t, u, statuses=[]) == []
        assert store.relations(t, ids("nobody")) == []

    def test_users_and_tenants_do_not_see_each_others_relations(self, store, ids):
        mine = self.key(ids, "math")
        theirs = self.key(ids, "math", user="other")
        elsewhere = self.key(ids, "math", tenant="t2")  # the same user id in another tenant
        for i, k in enumerate((mine, theirs, elsewhere)):
            store.merge(k, self.ev(ids, "e1", 0.3 + i / 10), BLEND)
        assert len({self.rel_id(k) for k in (mine, theirs, elsewhere)}) == 3
        for k, conf in ((mine, 0.3), (theirs, 0.4), (elsewhere, 0.5)):
            [rel] = store.relations(k.tenant, k.user_id)
            assert (rel.rel_id, rel.tenant, rel.user_id, rel.confidence) == (
                self.rel_id(k), k.tenant, k.user_id, pytest.approx(conf))
        assert store.relations(mine.tenant, ids("other") + "x") == []
        assert store.relations(elsewhere.tenant, ids("other")) == []

    # --- scan ------------------------------------------------------------------------------

    def test_scan_pages_through_active_relations_of_every_user_by_rel_id(self, store, ids):
        keys = [self.key(ids, f"s{i}", user=f"u{i % 3}") for i in range(7)]
        for k in keys:
            store.merge(k, self.ev(ids, "e1", 0.5), BLEND)
        store.set_status(self.rel_id(keys[1]), Status.retired, self.ev(ids, "r1"))
        store.set_status(self.rel_id(keys[3]), Status.deleted, self.ev(ids, "d1", 0.0, PERSON))
        inactive = {self.rel_id(keys[1]), self.rel_id(keys[3])}
        mine = sorted(self.rel_id(k) for k in keys)
        cursor, seen = mine[0][:-1], []  # just before this test's first rel_id; other tests' rows may interleave
        for _ in range(10_000):
            page = store.scan(cursor, 2)
            if not page:
                break
            assert len(page) <= 2 and all(isinstance(r, StoredRelation) for r in page)
            assert [r.rel_id for r in page] == sorted({r.rel_id for r in page}) and page[0].rel_id > cursor
            assert all(r.status is Status.active for r in page)
            seen += [r for r in page if r.rel_id in mine]
            cursor = page[-1].rel_id
            if cursor >= mine[-1]:
                break
        assert [r.rel_id for r in seen] == [r for r in mine if r not in inactive]
        assert {r.user_id for r in seen} == {ids("u0"), ids("u1"), ids("u2")}
        assert {r.rel_id: r for r in seen}[self.rel_id(keys[0])] == self.one(store, keys[0])

    def test_active_count_counts_what_a_scan_walks(self, store, ids):
        before = store.active_count()  # the store may be shared: count what this test adds
        keys = [self.key(ids, f"c{i}", user=f"u{i % 2}") for i in range(4)]
        for k in keys:
            store.merge(k, self.ev(ids, "e1", 0.5), BLEND)
        store.set_status(self.rel_id(keys[0]), Status.retired, self.ev(ids, "r1"))
        assert store.active_count() == before + 3

    def test_scan_after_the_last_rel_id_is_empty(self, store, ids):
        store.merge(self.key(ids, "x"), self.ev(ids, "e1"), BLEND)
        assert store.scan("r_\uffff", 10) == []
        assert len(store.scan("", 1)) == 1

    # --- evidence --------------------------------------------------------------------------

    def test_evidence_keeps_the_grants_its_claim_was_collected_under(self, store, ids):
        key = self.key(ids, "化学")
        store.merge(key, self.ev(ids, "e1").model_copy(update={"purposes": ["tutoring#2", "support#1"]}), BLEND)
        store.merge(key, self.ev(ids, "e2"), BLEND)  # a claim that names none: collected before purposes (ANY)
        assert [r.purposes for r in store.evidence([self.rel_id(key)])] == [["support#1", "tutoring#2"], ["*"]]

    def test_evidence_rows_say_what_happened_oldest_first(self, store, ids):
        key, other = self.key(ids, "加速度"), self.key(ids, "速度", Relation.learning_obstacle)
        rel, other_rel = self.rel_id(key), self.rel_id(other)
        steps: list[Callable[[], object]] = [
            lambda: store.merge(key, self.ev(ids, "e1", 0.6, message_ids=["m1", "消息2"], device_id="phone",
                                             session_id="s1", ts=100.5), BLEND),
            lambda: store.merge(other, self.ev(ids, "o1", 0.5), BLEND),
            lambda: store.merge(key, self.ev(ids, "e2", 0.9, LLM, message_ids=[], device_id="平板", ts=200.0), MAX),
            lambda: store.scale(rel, self.ev(ids, "c1", 0.8, COUNTER, message_ids=["m3"], note="反例"), 0.5),
            lambda: store.merge(key, self.ev(ids, "h1", 0.7, PERSON, message_ids=[], note="set by op"), HUMAN),
            lambda: store.merge(key, self.ev(ids, "e3", 0.2, RULE), BLEND),
            lambda: store.set_status(rel, Status.deleted, self.ev(ids, "d1", 0.0, PERSON, message_ids=[])),
        ]
        start = time.time()
        for step in steps:
            step()
            time.sleep(0.002)
        rows = store.evidence([rel])
        assert [(ids.names([r.evidence_id])[0], r.action, r.source) for r in rows] == [
            ("e1", "merge:blend", RULE), ("e2", "merge:max", LLM), ("c1", "counter", COUNTER),
            ("h1", "merge:human", PERSON), ("e3", "ignored", RULE), ("d1", "delete", PERSON)]
        assert [(r.before, r.after) for r in rows] == [
            (None, pytest.approx(0.6)), (pytest.approx(0.6), pytest.approx(0.9)),
            (pytest.approx(0.9), pytest.approx(0.45)), (pytest.approx(0.45), pytest.approx(0.7)),
            (pytest.approx(0.7), pytest.approx(0.7)), (pytest.approx(0.7), pytest.approx(0.7))]
        first, second, counter = rows[0], rows[1], rows[2]
        assert first.model_dump(exclude={"applied_at", "confidence", "after"}) == {
            "rel_id": rel, "evidence_id": ids("e1"), "source": RULE, "message_ids": ["m1", "消息2"],
            "device_id": "phone", "session_id": "s1", "ts": 100.5, "note": "", "action": "merge:blend",
            "before": None, "purposes": ["*"]}
        assert first.confidence == pytest.approx(0.6) and second.confidence == pytest.approx(0.9)
        assert (second.message_ids, second.device_id, second.session_id, second.ts) == ([], "平板", None, 200.0)
        assert (counter.confidence, counter.message_ids, counter.note) == (pytest.approx(0.8), ["m3"], "反例")
        assert start <= rows[0].applied_at <= rows[-1].applied_at <= time.time()
        assert [r.applied_at for r in rows] == sorted(r.applied_at for r in rows)
        both = store.evidence([other_rel, rel])
        assert [r.rel_id for r in both] == [rel, other_rel] + [rel] * 5  # oldest first across relations
        assert store.evidence([]) == [] and store.evidence([self.rel_id(self.key(ids, "never"))]) == []

    # --- Unicode, ping ---------------------------------------------------------------------

    def test_chinese_names_and_ids_are_kept_verbatim(self, store, ids):
        tenant = ids("租户")
        obj = "加速度和速度 🚀 «x»"
        key = RelationKey(tenant=tenant, user_id=ids("用户-一"), relation=Relation.learning_obstacle,
                          concept_id=mneme_ids.concept_id(tenant, obj), object=obj)
        change = store.merge(key, Evidence(evidence_id=ids("事件:一"), source=LLM, confidence=0.66,
                                           message_ids=["消息-1", "消息-2"], device_id="设备甲", session_id="会话",
                                           ts=5.0, note="总把加速度和速度搞混"), BLEND)
        assert (change.tenant, change.user_id, change.object, change.evidence_id) == (
            tenant, ids("用户-一"), obj, ids("事件:一"))
        [rel] = store.relations(tenant, ids("用户-一"), Relation.learning_obstacle)
        assert (rel.object, rel.tenant, rel.user_id) == (obj, tenant, ids("用户-一"))
        [row] = store.evidence([rel.rel_id])
        assert (row.evidence_id, row.message_ids, row.device_id, row.session_id, row.note) == (
            ids("事件:一"), ["消息-1", "消息-2"], "设备甲", "会话", "总把加速度和速度搞混")

    def test_erasing_a_user_removes_their_relations_evidence_and_lone_concepts(self, store, ids):
        mine, shared = self.key(ids, "私密的爱好"), self.key(ids, "math")
        theirs = self.key(ids, "math", user="other")
        store.merge(mine, self.ev(ids, "e1", 0.8), BLEND)
        store.merge(shared, self.ev(ids, "e2", 0.8), BLEND)
        store.merge(theirs, self.ev(ids, "e3", 0.8), BLEND)
        assert store.erase_user(mine.tenant, mine.user_id) == 2
        assert store.relations(mine.tenant, mine.user_id, statuses=list(Status)) == []
        assert store.evidence([self.rel_id(mine), self.rel_id(shared)]) == []
        assert [r.object for r in store.relations(theirs.tenant, theirs.user_id)] == ["math"]  # others untouched
        assert store.erase_user(mine.tenant, mine.user_id) == 0  # idempotent
        store.merge(mine, self.ev(ids, "e4", 0.6), BLEND)  # the id can come back as a fresh user
        assert self.one(store, mine).confidence == pytest.approx(0.6)

    def test_ping_answers_when_the_backend_is_up(self, store):
        assert store.ping() is None

    # --- atomicity under concurrency --------------------------------------------------------

    @staticmethod
    def run_together(calls: Sequence[Callable[[], object]]) -> list[object]:
        barrier = threading.Barrier(len(calls))
        results: list[object] = [None] * len(calls)
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                barrier.wait(timeout=10)
                results[i] = calls[i]()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        if errors:
            raise errors[0]
        return results

    def test_concurrent_deliveries_of_one_evidence_apply_once(self, store, ids):
        key = self.key(ids, "并发")
        store.merge(key, self.ev(ids, "e0", 0.2), BLEND)
        changes = self.run_together([lambda: store.merge(key, self.ev(ids, "e1", 0.9), BLEND)] * 6)
        assert all(c == changes[0] for c in changes) and changes[0].action == "merge:blend"
        assert self.one(store, key).confidence == pytest.approx(0.3 * 0.2 + 0.7 * 0.9)
        assert ids.names(r.evidence_id for r in store.evidence([self.rel_id(key)])) == ["e0", "e1"]

    def test_concurrent_evidence_loses_no_update(self, store, ids):
        key = self.key(ids, "concurrent")
        store.merge(key, self.ev(ids, "e0", 0.5), BLEND)
        confidences = [0.1 * (i + 1) for i in range(6)]
        self.run_together([lambda c=c, i=i: store.merge(key, self.ev(ids, f"e{i + 1}", c), BLEND)
                           for i, c in enumerate(confidences)])
        rows = store.evidence([self.rel_id(key)])
        assert len(rows) == 7 and {r.action for r in rows} == {"merge:blend"}
        for previous, row in zip(rows, rows[1:], strict=False):  # each merge saw the one before it
            assert row.before == pytest.approx(previous.after)
            assert row.after == pytest.approx(0.3 * previous.after + 0.7 * row.confidence)
        assert self.one(store, key).confidence == pytest.approx(rows[-1].after)

    def test_concurrent_first_evidence_makes_each_user_concept_and_relation_once(self, store, ids):
        keys = [self.key(ids, obj, relation) for obj in ("数学", "physics") for relation in (Relation.likes,
                                                                                           Relation.goal)]
        calls = [lambda k=k, i=i, j=j: store.merge(k, self.ev(ids, f"e{i}-{j}", 0.4 + j / 10), BLEND)
                 for i, k in enumerate(keys) for j in range(2)]
        self.run_together(calls)
        relations = store.relations(keys[0].tenant, keys[0].user_id)
        assert sorted((r.relation, r.object) for r in relations) == [
            ("goal", "physics"), ("goal", "数学"), ("likes", "physics"), ("likes", "数学")]
        for key in keys:
            first, second = store.evidence([self.rel_id(key)])
            assert first.before is None and second.before == pytest.approx(first.after)
