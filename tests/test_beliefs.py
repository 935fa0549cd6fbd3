"""Semantic memory you can trust, through the real API and workers: vocabulary, counter-evidence,
reviews, anchoring, devices, decay, and the user's own corrections."""

import json
import re
import time

import httpx
import pytest
from mneme_client import MnemeAPIError

from memory import ids
from memory.claims.rule import CONFIDENCE
from memory.errors import InvalidInput
from memory.graph import Status
from memory.models import Fact, FactSource, Relation
from memory.services.semantic import SemanticMemory
from memory.state.reviews import Reviews
from memory.vocabulary import load_vocabulary
from tests.stacks import audit_records


def say(client, uid, texts, session="s1", device=None, start=0):
    jobs = [client.remember(user_id=f"u{uid}", session_id=f"{session}-{uid}", message_id=f"{session}-m{i}",
                            role=role, content=text, device_id=device, client_ts=time.time() - 100 + i).job_id
            for i, (role, text) in enumerate(texts, start)]
    return client.wait(jobs)


def beliefs(client, stack, uid, inactive=False):
    r = httpx.get(f"{stack.api_url}/v1/users/u{uid}/profile", params={"include_inactive": inactive})
    r.raise_for_status()
    return {(b["relation"], b["object"]): b for b in r.json()["beliefs"]}


def test_vocabulary_is_closed_with_categories_and_half_lives():
    vocabulary = load_vocabulary()
    with pytest.raises(InvalidInput, match="unknown relation 'adores'.*likes"):
        vocabulary.relation("adores")
    assert vocabulary.half_life_days(Relation.likes) == 90 and vocabulary.half_life_days(Relation.emotion_state) == 1
    assert vocabulary.half_life_days(Relation.learning_obstacle) == 30
    assert vocabulary.half_life_days("no_longer_named") == vocabulary.default_half_life


def test_unknown_relation_is_refused_by_the_api_naming_the_vocabulary(stack, uid):
    r = httpx.put(f"{stack.api_url}/v1/users/u{uid}/beliefs", json={"relation": "adores", "object": "x"})
    assert r.status_code == 400 and "likes" in r.json()["message"] and "occupation" in r.json()["message"]
    r = httpx.put(f"{stack.api_url}/v1/users/u{uid}/beliefs", json={"relation": "Not A Name", "object": "x"})
    assert r.status_code == 422
    listed = httpx.get(f"{stack.api_url}/v1/vocabulary").json()
    by_name = {r["name"]: r for r in listed["relations"]}
    assert by_name["likes"]["opposite"] == "dislikes" and by_name["age"]["single_valued"]
    assert by_name["emotion_state"]["half_life_days"] == 1 and "risk_preference" in by_name


def test_showing_mastery_is_counter_evidence_for_a_learning_obstacle(client, stack, uid):
    say(client, uid, [("user", "我不懂三角函数")])
    assert beliefs(client, stack, uid)[("learning_obstacle", "三角函数")]["confidence"] == pytest.approx(
        CONFIDENCE["obstacle"], abs=0.01)
    say(client, uid, [("user", "我算出来了：sin²x+cos²x=1，所以原式等于1")], start=1)
    now = beliefs(client, stack, uid)
    obstacle = now[("learning_obstacle", "三角函数")]
    assert obstacle["confidence"] == pytest.approx(CONFIDENCE["obstacle"] / 2, abs=0.01)
    assert obstacle["source"] == "counter_evidence"
    assert "counter-evidence" in obstacle["why"] and ("mastery", "三角函数") in now


def test_a_like_then_its_opposite_keeps_both_and_opens_a_review(client, stack, uid):
    say(client, uid, [("user", "I like group projects")])
    say(client, uid, [("user", "I can't stand group projects")], start=1)
    now = beliefs(client, stack, uid)
    assert now[("likes", "group projects")]["confidence"] == pytest.approx(CONFIDENCE["likes"] / 2, abs=0.01)
    assert now[("dislikes", "group projects")]["confidence"] == pytest.approx(CONFIDENCE["dislikes"], abs=0.01)
    [review] = httpx.get(f"{stack.api_url}/v1/users/u{uid}/reviews").json()
    assert review["kind"] == "contradiction" and len(review["claims"]) == 2
    keep = now[("dislikes", "group projects")]["rel_id"]
    r = httpx.post(f"{stack.api_url}/v1/users/u{uid}/reviews/{review['review_id']}/resolve",
                   json={"keep": [keep], "operator_id": "teacher_7"})
    assert r.status_code == 200
    after = beliefs(client, stack, uid)
    assert ("likes", "group projects") not in after
    assert after[("dislikes", "group projects")]["source"] == "human"
    assert after[("dislikes", "group projects")]["confidence"] == pytest.approx(0.95, abs=0.01)
    assert httpx.get(f"{stack.api_url}/v1/users/u{uid}/reviews").json() == []


def test_anaphora_resolve_to_the_last_entity_of_that_kind_in_the_session(client, stack, uid):
    say(client, uid, [("assistant", "今天我们讲楞次定律：感应电流的磁场总要阻碍引起它的磁通量变化。"),
                      ("user", "我还是不懂那个定律"),
                      ("assistant", "The red submit button is at the bottom of the page."),
                      ("user", "I hate that red button"),
                      ("user", "我讨厌那个公式")])
    now = beliefs(client, stack, uid)
    assert ("learning_obstacle", "楞次定律") in now
    assert ("dislikes", "red submit button") in now
    assert not any("公式" in obj for _, obj in now)  # nothing to anchor to: one formula, not formulas: no belief
    for belief in now.values():
        assert re.fullmatch(r"[a-z][a-z0-9_]{0,31}", belief["concept_id"])
        assert belief["concept_id"] == ids.concept_id("default", belief["object"])


def test_devices_bind_to_one_account(client, uid):
    client.remember(user_id=f"u{uid}", session_id=f"a-{uid}", message_id="m1", role="user", content="hi",
                    device_id=f"pad-{uid}")
    with pytest.raises(MnemeAPIError) as err:
        client.remember(user_id=f"other{uid}", session_id=f"b-{uid}", message_id="m1", role="user", content="hi",
                        device_id=f"pad-{uid}")
    assert err.value.status == 409 and "bound to another account" in err.value.message


def fact(uid, rel, obj, conf, device, evidence):
    return Fact(tenant="default", user_id=f"u{uid}", relation=rel, object=obj, confidence=conf,
                evidence_id=evidence, message_ids=[evidence], ts=time.time(), device_id=device)


@pytest.fixture
def brain(runtime):
    policies = runtime.state.policies
    return SemanticMemory(runtime.semantic.store, Reviews(runtime.state.client), runtime.trail, runtime.settings,
                          runtime.vocabulary, lambda tenant, user_id: policies.get(tenant, user_id).consent)


def test_same_belief_from_another_device_keeps_the_higher_confidence(brain, uid):
    brain.apply([fact(uid, Relation.likes, "chess", 0.9, "phone", "e1")])
    brain.apply([fact(uid, Relation.likes, "chess", 0.5, "laptop", "e2")])
    [b] = brain.profile("default", f"u{uid}")
    assert b.stored_confidence == pytest.approx(0.9) and b.devices == ["laptop", "phone"]
    brain.apply([fact(uid, Relation.likes, "chess", 0.5, "phone", "e3")])  # same device: blend
    [b] = brain.profile("default", f"u{uid}")
    assert b.stored_confidence == pytest.approx(0.3 * 0.9 + 0.7 * 0.5)


def test_devices_that_disagree_go_to_review_and_updates_from_one_device_do_not(brain, uid):
    brain.apply([fact(uid, Relation.age, "16", 0.9, "phone", "e1")])
    brain.apply([fact(uid, Relation.age, "17", 0.9, "laptop", "e2")])
    assert [b.object for b in brain.profile("default", f"u{uid}")] == ["16"]  # the value held stays, alone
    held = {b.object: b for b in brain.profile("default", f"u{uid}", include_inactive=True)}["17"]
    assert held.status is Status.in_review and "held for review: another device says 16" in held.why
    [review] = brain.reviews.list_open("default", f"u{uid}")
    assert review.kind == "cross_device" and {c.object for c in review.claims} == {"16", "17"}
    brain.apply([fact(uid, Relation.age, "18", 0.9, "laptop", "e3")])  # the laptop's own update
    statuses = {b.object: b.status for b in brain.profile("default", f"u{uid}", include_inactive=True)}
    assert statuses == {"16": Status.active, "17": Status.superseded, "18": Status.in_review}


def test_confidence_decays_at_read_time_by_category(brain, uid):
    brain.apply([fact(uid, Relation.emotion_state, "紧张", 0.8, None, "e1"),
                 fact(uid, Relation.likes, "物理", 0.8, None, "e2")])
    later = time.time() + 86400
    got = {b.relation: b for b in brain.profile("default", f"u{uid}", now=later)}
    assert got[Relation.emotion_state].confidence == pytest.approx(0.4, rel=0.01)  # half-life 1 day
    assert got[Relation.likes].confidence == pytest.approx(0.8 * 0.5 ** (1 / 90), rel=0.01)
    assert "half-life of 1 d" in got[Relation.emotion_state].why


def test_nightly_decay_materialises_and_retires_but_keeps_for_audit(brain, uid):
    brain.apply([fact(uid, Relation.emotion_state, "沮丧", 0.6, None, "e1"),
                 fact(uid, Relation.likes, "化学", 0.8, None, "e2")])
    in_ten_days = time.time() + 10 * 86400
    dry = brain.decay(now=in_ten_days, dry_run=True)
    assert dry.retired >= 1 and len(brain.profile("default", f"u{uid}")) == 2  # dry run changes nothing
    brain.decay(now=in_ten_days)
    again = brain.decay(now=in_ten_days)  # safe to run twice
    assert not again.changes
    active = {b.object: b for b in brain.profile("default", f"u{uid}", now=in_ten_days)}
    assert "沮丧" not in active and active["化学"].stored_confidence == pytest.approx(0.8 * 0.5 ** (10 / 90), rel=1e-3)
    everything = {b.object: b for b in brain.profile("default", f"u{uid}", include_inactive=True)}
    assert everything["沮丧"].status is Status.retired and "retired by decay" in everything["沮丧"].why


def test_user_corrections_win_take_effect_at_once_and_are_audited(client, stack, uid):
    say(client, uid, [("user", "我今年15岁")])
    r = httpx.put(f"{stack.api_url}/v1/users/u{uid}/beliefs",
                  json={"relation": "age", "object": "16", "confidence": 1.0, "operator_id": "parent_1"})
    assert r.status_code == 200 and r.json()["source"] == "human"
    say(client, uid, [("user", "我今年16岁")], start=1)  # later extraction of the same belief: human value stays
    now = beliefs(client, stack, uid)
    assert now[("age", "16")]["stored_confidence"] == 1.0 and now[("age", "16")]["source"] == "human"
    assert ("age", "15") not in now  # replaced by the correction, kept with its history
    old = beliefs(client, stack, uid, inactive=True)[("age", "15")]
    assert old["status"] == "superseded" and "replaced by 16, set by parent_1" in old["why"]
    assert "set by parent_1; replaced 15" in now[("age", "16")]["why"]
    recall = client.recall(user_id=f"u{uid}", query="我几岁")
    assert [f.object for f in recall.facts if f.relation == "age"] == ["16"]
    rel = old["rel_id"]
    assert httpx.delete(f"{stack.api_url}/v1/users/u{uid}/beliefs/{rel}",
                        params={"operator_id": "parent_1"}).status_code == 200
    assert ("age", "15") not in beliefs(client, stack, uid)
    assert all(f.object != "15" for f in client.recall(user_id=f"u{uid}", query="我几岁").facts)
    assert beliefs(client, stack, uid, inactive=True)[("age", "15")]["status"] == "deleted"
    audit = audit_records(stack)
    ours = (rel, now[("age", "16")]["rel_id"])
    mine = [a for a in audit if a["operator_id"] == "parent_1" and a.get("rel_id") in ours]
    assert {a["action"] for a in mine} == {"graph.merge:human", "graph.delete"}
    assert all("u" + uid not in json.dumps(a) for a in mine)  # the user id is hashed
    assert httpx.delete(f"{stack.api_url}/v1/users/u{uid}/beliefs/nope").status_code == 404


def test_the_source_is_kept_per_piece_of_evidence(brain, uid):
    brain.apply([fact(uid, Relation.likes, "围棋", 0.7, None, "e1").model_copy(update={"source": FactSource.llm})])
    [b] = brain.profile("default", f"u{uid}")
    assert b.source is FactSource.llm and "llm evidence" in b.why


def ages(client, stack, uid, inactive=False):
    return {obj: b for (rel, obj), b in beliefs(client, stack, uid, inactive).items() if rel == "age"}


@pytest.mark.parametrize("first, then", [("我今年17岁", "我今年18岁"), ("I'm 17", "I'm 18")])
def test_a_new_age_from_the_same_device_replaces_the_old_one(client, stack, uid, first, then):
    say(client, uid, [("user", first)], device=f"pad-{uid}")
    say(client, uid, [("user", then)], device=f"pad-{uid}", start=1)
    assert list(ages(client, stack, uid)) == ["18"]  # one age at a time
    assert [f.object for f in client.recall(user_id=f"u{uid}", query=first).facts if f.relation == "age"] == ["18"]
    everything = ages(client, stack, uid, inactive=True)
    old, new = everything["17"], everything["18"]
    age = CONFIDENCE["age"]
    assert old["status"] == "superseded" and old["stored_confidence"] == pytest.approx(age)  # kept with its history
    assert "replaced by 18 (said later, same device)" in old["why"] and f"claimed {age:.2f}" in old["why"]
    assert "replaced 17 (said earlier, same device)" in new["why"]
    assert httpx.get(f"{stack.api_url}/v1/users/u{uid}/reviews").json() == []  # an update, not a conflict


def test_the_latest_word_of_a_device_wins_even_when_it_goes_back(brain, uid):
    for evidence, name in [("e1", "小明"), ("e2", "Ming"), ("e3", "小明")]:
        brain.apply([fact(uid, Relation.name, name, 0.9, "phone", evidence)])
    [b] = brain.profile("default", f"u{uid}")
    assert (b.object, b.status) == ("小明", Status.active) and "replaced Ming (said earlier, same device)" in b.why
    statuses = {b.object: b.status for b in brain.profile("default", f"u{uid}", include_inactive=True)}
    assert statuses == {"小明": Status.active, "Ming": Status.superseded}


@pytest.mark.parametrize("claim, value", [("我今年17岁", "17"), ("I'm 17", "17")])
def test_a_claim_against_a_human_correction_waits_for_review(client, stack, uid, claim, value):
    r = httpx.put(f"{stack.api_url}/v1/users/u{uid}/beliefs",
                  json={"relation": "age", "object": "16", "confidence": 1.0, "operator_id": "parent_1"})
    assert r.status_code == 200
    say(client, uid, [("user", claim)], device=f"pad-{uid}")
    now = ages(client, stack, uid)
    assert list(now) == ["16"] and now["16"]["source"] == "human" and now["16"]["stored_confidence"] == 1.0
    assert f"kept the human value; the rule claim {value} is under review" in now["16"]["why"]
    held = ages(client, stack, uid, inactive=True)[value]
    assert held["status"] == "in_review" and "held for review: disagrees with the human value 16" in held["why"]
    [review] = httpx.get(f"{stack.api_url}/v1/users/u{uid}/reviews").json()
    assert review["kind"] == "human_correction" and {c["object"] for c in review["claims"]} == {"16", value}
    say(client, uid, [("user", claim)], device=f"pad-{uid}", start=1)  # said again: still one review
    assert len(httpx.get(f"{stack.api_url}/v1/users/u{uid}/reviews").json()) == 1
    r = httpx.post(f"{stack.api_url}/v1/users/u{uid}/reviews/{review['review_id']}/resolve",
                   json={"keep": [held["rel_id"]], "operator_id": "parent_1"})  # the parent agrees with the pad
    assert r.status_code == 200
    after = ages(client, stack, uid)
    assert list(after) == [value] and after[value]["source"] == "human"
    assert ages(client, stack, uid, inactive=True)["16"]["status"] == "deleted"


def test_keeping_two_values_of_a_single_valued_relation_is_refused(brain, uid):
    brain.apply([fact(uid, Relation.age, "16", 0.9, "phone", "e1")])
    brain.apply([fact(uid, Relation.age, "17", 0.9, "laptop", "e2")])
    [review] = brain.reviews.list_open("default", f"u{uid}")
    with pytest.raises(InvalidInput, match="one age at a time"):
        brain.resolve("default", f"u{uid}", review.review_id, [c.rel_id for c in review.claims], "teacher_7")
