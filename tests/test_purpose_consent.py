"""Purpose-bound consent through the real API and workers: each memory records the grants it was collected
under, a recall or profile read naming a purpose sees only what serves it, and withdrawing a purpose removes
what only it covered — re-scoring the beliefs other purposes still support — with a receipt."""

import time

import httpx
import pytest
from mneme_client import MnemeAPIError

from memory.episodic import ALL_STATUSES
from memory.models import Fact, Relation
from tests.polling import wait_until

TENANT = "default"


def say(client, uid, n, text, session="a"):
    accepted = client.remember(user_id=f"u{uid}", session_id=f"{session}{uid}", message_id=f"m{n}", role="user",
                               content=text, client_ts=time.time() - 100 + n)
    return accepted.job_id


def said(client, uid, *texts, start=1):
    jobs = [say(client, uid, n, text) for n, text in enumerate(texts, start)]
    assert [j.state for j in client.wait(jobs)] == ["done"] * len(jobs)


def recalled(client, uid, query, purpose=None):
    result = client.recall(user_id=f"u{uid}", query=query, k=10, purpose=purpose)
    return {m for e in result.events for m in e.message_ids}, result


def beliefs(client, uid, purpose=None):
    return {(b.relation, b.object): b for b in client.profile(f"u{uid}", purpose=purpose).beliefs}


def test_a_purpose_sees_only_what_was_collected_for_it_and_its_withdrawal_removes_only_that(client, uid):
    user = f"u{uid}"
    client.consent(user, purposes=["tutoring"])
    said(client, uid, "我喜欢化学", "I can't stand loud music")  # tutoring only
    assert client.grant(user, "support").purposes == ["support", "tutoring"]
    said(client, uid, "我最喜欢化学了", "My order 4471 arrived with a cracked screen", start=3)  # both

    # a read names its purpose: support sees what was collected while support was granted
    found, result = recalled(client, uid, "my order arrived with a cracked screen", purpose="support")
    assert "m4" in found and not found & {"m1", "m2"} and result.purpose == "support"
    assert all(e.purposes == ["support", "tutoring"] for e in result.events)
    support, tutoring = beliefs(client, uid, "support"), beliefs(client, uid, "tutoring")
    assert set(support) == {("likes", "化学"), ("order_history", "4471")}
    assert support[("likes", "化学")].purposes == ["support", "tutoring"]
    assert set(tutoring) == {("likes", "化学"), ("dislikes", "loud music"), ("order_history", "4471")}
    assert beliefs(client, uid, "analytics") == {}
    _, result = recalled(client, uid, "化学", purpose="analytics")  # a purpose the user did not grant
    assert not result.events and not result.facts and "analytics" in result.degraded["long_term"]
    found, _ = recalled(client, uid, "loud music")  # a caller that names none: any purpose granted
    assert "m2" in found
    likes = support[("likes", "化学")]

    receipt = client.withdraw(user, "tutoring", operator_id="the-user")
    assert receipt.purposes == ["tutoring"] and receipt.messages == ["m1", "m2"] and receipt.deleted_events >= 2
    assert receipt.beliefs_rescored == [likes.rel_id]  # m3 still supports it, for support
    assert [b for b in receipt.beliefs_removed] == [tutoring[("dislikes", "loud music")].rel_id]

    policy = client.policy(user)
    assert policy.purposes == ["support"] and "tutoring" in policy.withdrawn_purposes and policy.keeps_long_term
    _, result = recalled(client, uid, "化学", purpose="tutoring")
    assert not result.events and not result.facts and "tutoring" in result.degraded["long_term"]
    found, _ = recalled(client, uid, "loud music music I can't stand")
    assert not found & {"m1", "m2"}
    left = beliefs(client, uid)
    assert set(left) == {("likes", "化学"), ("order_history", "4471")}
    assert left[("likes", "化学")].purposes == ["support"] and "m1" not in left[("likes", "化学")].message_ids
    assert "withdrawn" in left[("likes", "化学")].why

    # granted again: a new grant, which nothing collected under the first one serves
    client.grant(user, "tutoring")
    found, _ = recalled(client, uid, "my order arrived with a cracked screen", purpose="tutoring")
    assert "m4" not in found
    found, _ = recalled(client, uid, "my order arrived with a cracked screen", purpose="support")
    assert "m4" in found
    said(client, uid, "My tracking number for order 4471 is missing", start=5)
    found, _ = recalled(client, uid, "tracking number for my order", purpose="tutoring")
    assert "m5" in found and "m4" not in found


def test_consent_set_to_fewer_purposes_withdraws_the_rest_and_answers_what_went(client, uid):
    user = f"u{uid}"
    client.consent(user, purposes=["analytics"])
    said(client, uid, "我喜欢用动画学物理")  # under analytics only
    client.grant(user, "support")
    said(client, uid, "我讨厌排队", start=2)  # under analytics and support
    change = client.consent(user, purposes=["support"])  # analytics withdrawn: m1 served only it
    assert change.purposes == ["support"] and change.withdrawal is not None
    assert change.withdrawal.purposes == ["analytics"] and change.withdrawal.messages == ["m1"]
    assert set(beliefs(client, uid)) == {("dislikes", "排队")}
    again = client.consent(user)  # opting in, naming none: every purpose, nothing withdrawn
    assert again.purposes == sorted(client.purposes()) and again.withdrawal is None
    assert set(beliefs(client, uid, "support")) == {("dislikes", "排队")}
    assert beliefs(client, uid, "analytics") == {}  # m2's analytics grant was withdrawn: this is a new one


def test_work_still_queued_when_its_purpose_is_withdrawn_keeps_nothing(client, uid, runtime, stack):
    user = f"u{uid}"
    client.consent(user, purposes=["tutoring"])
    stack.stop_one("worker-embed")
    try:
        job = say(client, uid, 1, "I love astronomy")  # collected under tutoring only
        wait_until(lambda: client.job(job).state == "extracted" and beliefs(client, uid), 60, "extracted, belief made")
        client.grant(user, "support")
        receipt = client.withdraw(user, "tutoring")
        assert receipt.messages == ["m1"] and len(receipt.beliefs_removed) == 1  # the graph branch had run
    finally:
        stack.start_one("worker-embed")
        stack.wait_ready(wait_embedder=False)
    assert client.wait([job])[0].state == "done"
    assert runtime.episodic.store.dump(TENANT, user, statuses=ALL_STATUSES) == []  # the embed branch kept nothing
    assert runtime.privacy.forget_unserved(TENANT, user, "sweep", ["tutoring"]).messages == []  # nothing raced


def test_an_unknown_purpose_is_refused_with_the_deployments_purposes(client, stack, uid):
    with pytest.raises(MnemeAPIError) as err:
        client.recall(user_id=f"u{uid}", query="化学", purpose="marketing")
    assert err.value.status == 400 and "personalisation" in err.value.message and "marketing" in err.value.message
    for call in (lambda: client.withdraw(f"u{uid}", "marketing"), lambda: client.consent(f"u{uid}", purposes=["x"]),
                 lambda: client.profile(f"u{uid}", purpose="marketing")):
        with pytest.raises(MnemeAPIError) as err:
            call()
        assert err.value.status in (400, 422) and "purpose" in err.value.message
    bad = httpx.put(f"{stack.api_url}/v1/users/u{uid}/consent/Not-A-Purpose")
    assert bad.status_code in (400, 422) and "purpose" in bad.text
    assert client.policy(f"u{uid}").withdrawn_purposes == []  # nothing was changed


def test_reads_record_their_purpose_and_the_export_what_each_memory_was_collected_under(client, uid):
    user = f"u{uid}"
    client.consent(user, purposes=["support", "tutoring"])
    said(client, uid, "My order 5512 never arrived")
    recalled(client, uid, "order never arrived", purpose="support")
    reads = wait_until(lambda: [r for r in client.reads(user).reads if r.action == "read.recall"], 30, "read record")
    assert reads[0].purpose == "support"
    events = client.export(user)["episodic_events"]
    assert events and all(e["collected_under"] == ["support#1", "tutoring#1"] for e in events)


def test_the_sweep_removes_what_a_write_racing_the_withdrawal_left_and_it_serves_nothing_meanwhile(
        client, uid, runtime):
    user = f"u{uid}"
    client.consent(user, purposes=["support", "tutoring"])
    said(client, uid, "I can't stand waiting on hold")
    client.withdraw(user, "tutoring")
    # a graph write that read the grants before the withdrawal and wrote after it
    runtime.semantic.apply([Fact(tenant=TENANT, user_id=user, relation=Relation.likes, object="chess", confidence=0.8,
                                 evidence_id=f"raced-{uid}", message_ids=["m9"], ts=time.time(),
                                 purposes=["tutoring#1"])])
    assert set(beliefs(client, uid)) == {("dislikes", "waiting on hold")}  # it serves no purpose: never shown
    report = runtime.privacy.sweep()
    assert report["withdrawals"]["checked"] >= 1 and report["withdrawals"]["messages_removed"] >= 1
    left = runtime.semantic.profile(TENANT, user, include_inactive=True)
    assert [b.status for b in left if b.object == "chess"] == ["retired"]
    assert runtime.privacy.forget_unserved(TENANT, user, "sweep", ["tutoring"]).messages == []
