"""The embedded SQLite adapters on real files: merge arithmetic, idempotence, isolation, filters."""

import pytest

from memory.graph.sqlite import SQLiteGraphStore
from memory.models import Fact, FactSource, Relation


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
