"""The embedded SQLite adapters on real files: merge arithmetic, idempotence, isolation, filters."""

import time

import numpy as np
import pytest

from memory.episodic import StoredEvent
from memory.episodic.sqlite import SQLiteEpisodicStore
from memory.graph.sqlite import SQLiteGraphStore
from memory.models import EventType, Fact, FactSource, Relation, Role


def fact(obj: str, conf: float, evidence: str, relation: Relation = Relation.likes, user: str = "u") -> Fact:
    return Fact(tenant="t", user_id=user, relation=relation, object=obj, confidence=conf, evidence_id=evidence,
                message_ids=[f"m-{evidence}"], ts=1.0)


@pytest.fixture
def graph(tmp_path):
    return SQLiteGraphStore(tmp_path / "graph.db")


def beliefs(graph, user="u"):
    return {(f.relation.value, f.object): f for f in graph.facts("t", user, 50)}


def test_new_evidence_merges_three_tenths_old_seven_tenths_new(graph):
    graph.apply([fact("物理", 0.5, "e1")])
    graph.apply([fact("物理", 0.9, "e2")])
    got = beliefs(graph)[("likes", "物理")]
    assert got.confidence == pytest.approx(0.3 * 0.5 + 0.7 * 0.9)
    assert got.evidence_count == 2 and got.message_ids == ["m-e1", "m-e2"] and got.event_ids == ["e1", "e2"]


def test_the_same_evidence_applied_twice_changes_nothing(graph):
    graph.apply([fact("physics", 0.5, "e1")])
    first = beliefs(graph)[("likes", "physics")]
    changes = graph.apply([fact("physics", 0.5, "e1")])
    again = beliefs(graph)[("likes", "physics")]
    assert again.confidence == first.confidence and again.evidence_count == 1
    assert [(c.before, c.after) for c in changes] == [(None, 0.5)]  # the change it made the first time


def test_confidence_is_clamped(graph):
    graph.apply([fact("x", 0.1, "e1")])
    for i in range(5):
        graph.apply([fact("x", 1.0, f"e{i + 2}")])
    assert beliefs(graph)[("likes", "x")].confidence <= 1.0


def test_a_new_age_is_counter_evidence_for_the_old_one(graph):
    graph.apply([fact("17", 0.9, "e1", Relation.age)])
    changes = graph.apply([fact("18", 0.9, "e2", Relation.age)])
    now = beliefs(graph)
    assert now[("age", "18")].confidence == pytest.approx(0.9)
    assert now[("age", "17")].confidence == pytest.approx(0.45)
    assert now[("age", "17")].source is FactSource.counter_evidence
    assert {(c.object, c.source.value) for c in changes} == {("18", "rule"), ("17", "counter_evidence")}
    assert [f.object for f in graph.facts("t", "u", 50)][0] == "18"


def test_users_do_not_see_each_others_facts(graph):
    graph.apply([fact("math", 0.8, "e1", user="alice")])
    assert beliefs(graph, "bob") == {}


def event(eid: str, user: str, kind: EventType, tokens: list[str], ts: float = 1.0, conf: float = 0.8,
          role: Role = Role.user) -> StoredEvent:
    return StoredEvent(event_id=eid, tenant="t", user_id=user, session_id="s", ts=ts, event_type=kind, role=role,
                       lang="zh", text_hash="0" * 64, message_ids=[f"m-{eid}"], confidence=conf,
                       sealed=b"opaque", tokens=tokens)


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def episodic(tmp_path):
    return SQLiteEpisodicStore(tmp_path / "ep.db")


def test_episodic_add_is_idempotent_and_search_filters(episodic):
    events = [event("a", "u", EventType.question, ["k1", "k2"]),
              event("b", "u", EventType.preference, ["k3", "k4"]),
              event("c", "other", EventType.question, ["k1", "k2"])]
    vectors = np.stack([unit(1, 0), unit(0, 1), unit(1, 0)])
    assert episodic.add(events, vectors, 0.95, 200).inserted == ["a", "b", "c"]
    again = episodic.add(events, vectors, 0.95, 200)  # redelivery
    assert again.known == ["a", "b", "c"] and not again.inserted and not again.merged
    assert [e for e, _ in episodic.keyword_search("t", "u", ["k1"], None, 10)] == ["a"]
    assert [e for e, _ in episodic.vector_search("t", "u", unit(1, 0.1), None, 10)] == ["a", "b"]
    assert [e for e, _ in episodic.vector_search("t", "u", unit(1, 0.1), {EventType.preference}, 10)] == ["b"]
    assert episodic.keyword_search("t", "u", ["k3"], {EventType.question}, 10) == []
    assert [e.event_id for e in episodic.get("t", "u", ["b", "a", "c"])] == ["b", "a"]


def test_similar_events_of_one_type_merge_with_all_provenance(episodic):
    refund = unit(1, 0.05)
    for i in range(3):  # three "怎么退款"
        episodic.add([event(f"r{i}", "u", EventType.question, ["退款"], ts=float(i), conf=0.7)],
                     np.stack([refund]), 0.9, 200)
    episodic.add([event("other", "u", EventType.question, ["物理"])], np.stack([unit(0, 1)]), 0.9, 200)
    episodic.add([event("pref", "u", EventType.preference, ["退款"])], np.stack([refund]), 0.9, 200)
    [merged] = episodic.get("t", "u", ["r0"])
    assert merged.count == 3 and merged.message_ids == ["m-r0", "m-r1", "m-r2"] and merged.ts == 2.0
    assert merged.confidence == pytest.approx(1 - 0.3 * 0.3 * 0.3) and merged.confidence > 0.7
    assert episodic.live_count("t", "u") == 3  # the refund question, the physics question, the preference
    assert episodic.add([event("r1", "u", EventType.question, ["退款"])], np.stack([refund]), 0.9, 200).known


def test_cap_evicts_small_talk_and_old_low_confidence_first_and_says_so(episodic):
    now = time.time()
    rows = [event("chat", "u", EventType.small_talk, [], ts=now, conf=0.9),
            event("old_weak", "u", EventType.statement, [], ts=now - 200 * 86400, conf=0.3),
            event("fresh_fact", "u", EventType.age_declaration, [], ts=now, conf=0.9),
            event("old_fact", "u", EventType.concept_confusion, [], ts=now - 200 * 86400, conf=0.9)]
    vectors = np.eye(4, dtype=np.float32)
    report = episodic.add(rows, vectors, 0.99, 2)
    assert sorted(e.event_id for e in report.evicted) == ["chat", "old_weak"]
    assert episodic.live_count("t", "u") == 2
    assert {e for e, _ in episodic.vector_search("t", "u", unit(1, 1, 1, 1), None, 10)} == {"fresh_fact", "old_fact"}
    assert [e.status for e in episodic.get("t", "u", ["chat"])] == ["evicted"]  # kept, not silently deleted
