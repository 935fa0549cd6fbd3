"""The labelled belief set (bench/beliefs) and how the bench scores against it (bench/beliefs_dev.py): what the
repo keeps of the public dev sets is ids and labels, never their text (their licences); a belief matches a label
as the labelling guide says; the hand-written cases are what the guide asks for."""

import json

import pytest

from bench.beliefs_dev import SPLITS, judge, labelled, matches, rules, same_object
from bench.devsets import dev_data_root
from memory.models import Fact
from memory.vocabulary import load_vocabulary

RELATIONS = set(load_vocabulary().names)
TRAPS = {"question", "conditional", "habit", "negation", "other_person", "reported_speech", "nickname", "pronoun",
         "politeness", "reaction", "quote", "pasted", "idiom", "hypothetical", "plan"}


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


FILES = [f for files in SPLITS.values() for f in files]


@pytest.mark.parametrize("labels", [f for f in FILES if "labels" in f.name], ids=lambda f: f.name)
def test_the_dev_sets_labels_hold_ids_and_labels_only(labels):
    rows = lines(labels)
    assert rows and all(set(row) <= {"set", "id", "beliefs", "traps"} for row in rows)  # no text, no context
    assert len({(row["set"], row["id"]) for row in rows}) == len(rows)
    for row in rows:
        assert set(row.get("traps", [])) <= TRAPS
        for belief in row["beliefs"]:
            assert belief["relation"] in RELATIONS and set(belief.get("also_relations", [])) <= RELATIONS
            assert all(len(o) <= 60 for o in [belief["object"], *belief.get("also", [])])  # a label, not an excerpt


@pytest.mark.parametrize("cases", [f for f in FILES if "cases" in f.name], ids=lambda f: f.name)
def test_the_hand_written_cases_are_labelled_by_the_guide(cases):
    rows = lines(cases)
    assert {row["lang"] for row in rows} == {"zh", "en", "mixed"} and len({row["id"] for row in rows}) == len(rows)
    assert any(not row["beliefs"] for row in rows) and any(row["beliefs"] for row in rows)
    for row in rows:
        for belief in row["beliefs"]:
            assert belief["relation"] in RELATIONS
            assert belief["relation"] == "age" or belief["object"] in row["text"], (row["id"], belief)


@pytest.mark.parametrize(("made", "label", "same"), [
    ("vintage camera", "vintage camera", True), ("the Vintage Camera!", "vintage camera", True),
    ("new vintage camera", "vintage camera", True), ("camera", "my new vintage camera", False),
    ("安静的咖啡馆", "咖啡馆", True), ("的颜色是蓝色", "蓝色", False), ("R&amp;D", "R&D", True), ("", "x", False),
])
def test_a_belief_matches_a_label_as_the_guide_says(made, label, same):
    assert same_object(made, label) is same


def test_a_belief_matches_only_its_relation_or_one_the_label_allows():
    fact = Fact(tenant="t", user_id="u", relation="likes", object="diagrams", confidence=0.8, evidence_id="e",
                message_ids=["m"], ts=0.0)
    assert matches(fact, {"relation": "likes", "object": "diagrams"})
    assert not matches(fact, {"relation": "learning_style", "object": "diagrams"})
    assert matches(fact, {"relation": "learning_style", "object": "diagrams", "also_relations": ["likes"]})


def test_the_bench_scores_a_turn_by_what_the_pipeline_makes_of_it():
    case = {"id": "c1", "set": "cases", "lang": "zh", "text": "我还是不懂那个定律", "before": "今天讲楞次定律",
            "beliefs": [{"relation": "learning_obstacle", "object": "楞次定律"}]}
    [judged] = judge([case, ], rules)
    assert judged["found"] == [True] and [m[:2] for m in judged["made"]] == [("learning_obstacle", "楞次定律")]
    [alone] = judge([case | {"before": ""}], rules)  # nothing to anchor "那个定律" to: no belief
    assert alone["made"] == [] and alone["found"] == [False]


@pytest.mark.skipif(not (dev_data_root() / "memdaily" / "load.py").exists(), reason="no ../shared/dev-data here")
def test_every_labelled_dev_turn_is_found_in_the_dev_data():
    for split in SPLITS:
        turns = labelled(dev_data_root(), split)
        assert {t["set"] for t in turns} >= {"memdaily", "realmem", "prefeval", "vehiclemembench", "cases"}
        assert all(t["text"].strip() for t in turns)
