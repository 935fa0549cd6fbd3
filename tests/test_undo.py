"""撤回上一条 through the real API and workers: undo walks back one message a call, down to an empty window,
and whatever long-term memory made of a message taken back goes too — its events (not what other messages
merged into them said) and its graph evidence — even when its work was still queued."""

import time

import httpx
import pytest
from mneme_client import MnemeAPIError

from memory import ids
from memory.episodic import ALL_STATUSES
from memory.state import keys
from tests.polling import wait_until
from tests.stacks import drain
from workers.celery_app import create_celery

TENANT = "default"


def say(client, uid, n, content, session="a", ts=None):
    return client.remember(user_id=f"u{uid}", session_id=f"{session}{uid}", message_id=f"m{n}", role="user",
                           content=content, client_ts=ts if ts is not None else 1_700_000_000 + n)


def window(client, uid, session="a"):
    return [m.message_id for m in client.messages(f"{session}{uid}").messages]


def wait_retracted(client, job_id):
    """A retracted message's job says so once nothing of it is left in long-term memory."""
    wait_until(lambda: client.job(job_id).state == "retracted", 60, f"retracted: {job_id}")


def recalled(client, uid, query):
    result = client.recall(user_id=f"u{uid}", query=query, k=10)
    events = {m for hit in result.events for m in hit.message_ids}
    facts = {(f.relation, f.object): f.message_ids for f in result.facts}
    return events, facts


def test_undo_walks_back_one_message_each_time_down_to_an_empty_window(client, uid):
    for n, text in enumerate(["我喜欢物理", "I prefer short answers", "第三条：明天考试"], start=1):
        say(client, uid, n, text)
    for gone, left in (("m3", ["m1", "m2"]), ("m2", ["m1"]), ("m1", [])):
        undone = client.rollback(f"a{uid}")  # 撤回上一条
        assert [m.message_id for m in undone.removed] == [gone] and undone.restored is None
        assert window(client, uid) == left
    with pytest.raises(MnemeAPIError) as err:
        client.rollback(f"a{uid}")
    assert err.value.status == 409 and "nothing to undo" in err.value.message
    assert client.messages(f"a{uid}").version == 6  # three messages, three undos: the refusal made no version
    assert [m.content for m in client.messages(f"a{uid}", version=3).messages] == [
        "我喜欢物理", "I prefer short answers", "第三条：明天考试"]  # to_version still restores a kept snapshot
    restored = client.rollback(f"a{uid}", to_version=2)
    assert restored.restored == 2 and window(client, uid) == ["m1", "m2"]


def test_a_message_appended_after_an_undo_is_the_next_one_undone(client, uid):
    say(client, uid, 1, "你好")
    say(client, uid, 2, "I like chemistry")
    assert [m.message_id for m in client.rollback(f"a{uid}").removed] == ["m2"]
    say(client, uid, 3, "其实我喜欢生物")
    say(client, uid, 4, "written earlier, sent last", ts=1_600_000_000)  # sorts first, appended last
    assert window(client, uid) == ["m4", "m1", "m3"]
    assert [m.message_id for m in client.rollback(f"a{uid}").removed] == ["m4"]
    assert [m.message_id for m in client.rollback(f"a{uid}").removed] == ["m3"]
    assert window(client, uid) == ["m1"]


def test_a_retracted_message_id_is_not_accepted_again(client, uid):
    say(client, uid, 1, "我今年16岁")
    client.rollback(f"a{uid}")
    with pytest.raises(MnemeAPIError) as err:  # a retry of the post, or the id reused: either way not silently
        say(client, uid, 1, "我今年16岁")
    assert err.value.status == 409 and "new message_id" in err.value.message
    assert window(client, uid) == []
    assert not say(client, uid, 2, "我今年16岁").duplicate  # the same words under a new id are a new message
    assert window(client, uid) == ["m2"]


def test_an_undone_message_is_not_recalled_and_its_beliefs_go(client, uid, runtime):
    kept = say(client, uid, 1, "我喜欢天文学")
    undone = say(client, uid, 2, "I'm 16 years old and I love chemistry")
    client.wait([kept.job_id, undone.job_id])
    events, facts = recalled(client, uid, "chemistry 天文学 how old am i")
    assert "m2" in events and ("likes", "chemistry") in facts and ("age", "16") in facts
    client.rollback(f"a{uid}")
    wait_retracted(client, undone.job_id)
    events, facts = recalled(client, uid, "chemistry 天文学 how old am i")
    assert "m2" not in events and "m1" in events
    assert set(facts) == {("likes", "天文学")} and facts[("likes", "天文学")] == ["m1"]
    assert all("m2" not in b.message_ids for b in client.profile(f"u{uid}").beliefs)
    assert client.job(kept.job_id).state == "done"


def test_undoing_the_message_an_event_was_made_from_keeps_what_another_message_merged_into_it(client, uid,
                                                                                               runtime):
    first = say(client, uid, 1, "我总是把加速度和速度搞混", session="a")
    client.wait([first.job_id])
    again = say(client, uid, 2, "我总是把加速度和速度搞混了", session="b")  # another session, same memory
    [job] = client.wait([again.job_id])
    assert job.merged == 1  # absorbed by the event message m1 made
    client.rollback(f"a{uid}")  # 撤回 m1 in its session
    wait_retracted(client, first.job_id)
    events, facts = recalled(client, uid, "加速度和速度搞混")
    assert events == {"m2"}
    assert facts and all(ids == ["m2"] for ids in facts.values())  # still believed, held by m2 alone
    [hit] = client.recall(user_id=f"u{uid}", query="加速度和速度搞混").events
    assert (hit.tier, hit.count) == ("event", 1)
    rows = runtime.episodic.store.dump(TENANT, f"u{uid}", statuses=ALL_STATUSES)
    assert {e.message_id for e, _ in rows} == {"m2"}


def test_undoing_a_newer_age_gives_back_the_one_it_replaced(client, uid):
    older = say(client, uid, 1, "I'm 16 years old")
    client.wait([older.job_id])
    newer = say(client, uid, 2, "我今年17岁")
    client.wait([newer.job_id])
    assert [b.object for b in client.profile(f"u{uid}").beliefs if b.relation == "age"] == ["17"]
    client.rollback(f"a{uid}")
    wait_retracted(client, newer.job_id)
    [age] = [b for b in client.profile(f"u{uid}").beliefs if b.relation == "age"]
    assert (age.object, age.message_ids) == ("16", ["m1"])


def belief(client, uid, relation, obj):
    return next((b for b in client.profile(f"u{uid}").beliefs if (b.relation, b.object) == (relation, obj)), None)


def test_undoing_the_message_that_contradicted_a_belief_gives_it_back_its_confidence(client, uid):
    client.wait([say(client, uid, 1, "I like chemistry").job_id])
    held = belief(client, uid, "likes", "chemistry")
    contradicted = say(client, uid, 2, "I don't like chemistry")  # counter-evidence: ×0.5
    client.wait([contradicted.job_id])
    assert belief(client, uid, "likes", "chemistry").confidence == pytest.approx(held.confidence * 0.5, abs=0.01)
    client.rollback(f"a{uid}")  # 撤回
    wait_retracted(client, contradicted.job_id)
    back = belief(client, uid, "likes", "chemistry")
    assert back.confidence == pytest.approx(held.confidence, abs=0.01)  # re-scored from what m1 says
    assert back.message_ids == ["m1"] and "re-scored" in back.why
    assert belief(client, uid, "dislikes", "chemistry") is None


def test_undoing_one_of_two_messages_behind_a_belief_re_scores_it_from_the_other(client, uid):
    client.wait([say(client, uid, 1, "I like chemistry").job_id])
    alone = belief(client, uid, "likes", "chemistry").stored_confidence
    client.wait([say(client, uid, 2, "I don't like chemistry").job_id])  # ×0.5
    client.wait([say(client, uid, 3, "I love chemistry").job_id])  # 0.3 · 0.35 + 0.7 · 0.7
    both = belief(client, uid, "likes", "chemistry")
    client.rollback(f"a{uid}")  # m3 goes: what m1 and m2 say remains (m1's claim, then m2's ×0.5)
    wait_retracted(client, f"{ids.job_id(TENANT, f'a{uid}', 'm3')}")
    left = belief(client, uid, "likes", "chemistry")
    assert left.stored_confidence == pytest.approx(alone * 0.5, abs=0.01) != pytest.approx(both.stored_confidence)
    assert left.message_ids == ["m1"]


def test_retracting_again_changes_nothing(client, uid, runtime, stack):
    accepted = say(client, uid, 1, "I love chemistry and 我喜欢物理")
    client.wait([accepted.job_id])
    client.rollback(f"a{uid}")
    wait_retracted(client, accepted.job_id)
    before = (runtime.episodic.store.dump(TENANT, f"u{uid}", statuses=ALL_STATUSES),
              runtime.semantic.profile(TENANT, f"u{uid}", include_inactive=True), client.job(accepted.job_id))
    celery = create_celery(stack.settings)
    for _ in range(2):  # the broker redelivers the retraction, twice
        celery.send_task("memory.retract", queue="extract", kwargs={
            "tenant": TENANT, "user_id": f"u{uid}", "session_id": f"a{uid}", "message_ids": ["m1"]})
    drain(runtime)
    after = (runtime.episodic.store.dump(TENANT, f"u{uid}", statuses=ALL_STATUSES),
             runtime.semantic.profile(TENANT, f"u{uid}", include_inactive=True), client.job(accepted.job_id))
    assert after == before


@pytest.mark.parametrize("how", ["undo", "session deleted"])
def test_taking_back_a_message_whose_work_is_still_queued_leaves_nothing_of_it(client, uid, runtime, stack, how):
    stack.stop_one("worker-pipeline")
    try:
        accepted = say(client, uid, 1, "我喜欢天文学，我今年15岁")
        if how == "undo":
            assert [m.message_id for m in client.rollback(f"a{uid}").removed] == ["m1"]
        else:
            deleted = httpx.delete(f"{stack.api_url}/v1/sessions/a{uid}")
            assert deleted.status_code == 200 and deleted.json()["messages"] == ["m1"]
    finally:
        stack.start_one("worker-pipeline")
        stack.wait_ready(wait_embedder=False)
    wait_retracted(client, accepted.job_id)
    drain(runtime)
    assert runtime.episodic.store.dump(TENANT, f"u{uid}", statuses=ALL_STATUSES) == []
    assert runtime.semantic.profile(TENANT, f"u{uid}", include_inactive=True) == []
    events, facts = recalled(client, uid, "天文学 我几岁")
    assert not events and not facts and window(client, uid) == []


def test_a_retraction_whose_task_never_reached_the_broker_is_re_sent_by_the_redrive(client, uid, runtime, stack):
    """The rollback records its retraction in its Redis step; an API that died before it pushed
    ``memory.retract`` (here: a rollback that pushes nothing) leaves the record, and the redrive re-sends it."""
    said = say(client, uid, 1, "I'm 15 and I love chemistry")
    client.wait([said.job_id])
    assert "m1" in recalled(client, uid, "chemistry")[0]
    runtime.working.rollback(TENANT, f"a{uid}", None, task=None)  # taken back, its task never sent
    [recorded] = [r for r in runtime.working.unfinished_retractions(0, 1000) if r.user_id == f"u{uid}"]
    assert recorded.message_ids == ["m1"]
    assert "m1" in recalled(client, uid, "chemistry")[0]  # nothing removed it yet
    key = keys.retracting(ids.shard(TENANT, f"a{uid}"))
    runtime.state.client.zadd(key, {recorded.member(): time.time() - 3600})  # recorded an hour ago
    create_celery(stack.settings).send_task("memory.redrive", kwargs={"limit": 1000})
    wait_until(lambda: "m1" not in recalled(client, uid, "chemistry")[0], 60, "removed by the re-sent retraction")
    wait_until(lambda: not runtime.state.client.zscore(key, recorded.member()), 60, "the retraction done")
    assert all("m1" not in b.message_ids for b in client.profile(f"u{uid}").beliefs)
