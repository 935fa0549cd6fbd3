"""Two sessions of one user that number their messages alike (m1, m2, … in each) are different messages to
long-term memory, through the real API and workers: each is remembered, and taking one back — deleted or
undone — removes what it made only, never what the other session's message of the same id said."""

from tests.polling import wait_until
from tests.test_undo import say, wait_retracted


def done(client, receipt):
    wait_until(lambda: client.job(receipt.job_id).state == "done", 60, f"done: {receipt.job_id}")


def said_in_both(client, uid, first, second):
    """``first`` as m1 of session a, then ``second`` as m1 of session b, each through the pipeline."""
    receipts = []
    for text, session in ((first, "a"), (second, "b")):
        receipts.append(say(client, uid, 1, text, session=session))
        done(client, receipts[-1])
    return receipts


def beliefs(client, uid):
    return {b.object: b for b in client.profile(f"u{uid}").beliefs}


def summaries(client, uid):
    return sorted(e.summary for e in client.events(f"u{uid}").events)


def test_the_same_message_id_in_two_sessions_is_two_messages(client, uid):
    said_in_both(client, uid, "我喜欢物理", "I like chemistry")
    assert {"物理", "chemistry"} <= beliefs(client, uid).keys()
    assert summaries(client, uid) == ["I like chemistry", "我喜欢物理"]  # once, b's was taken for a redelivery of a's


def test_deleting_a_message_leaves_the_same_id_of_another_session(client, uid):
    said_in_both(client, uid, "我喜欢物理", "I like chemistry")
    chemistry = beliefs(client, uid)["chemistry"]
    receipt = client.delete_message(f"b{uid}", "m1")
    assert (receipt.deleted_events, receipt.beliefs_removed, receipt.beliefs_rescored) == (1, [chemistry.rel_id], [])
    assert "物理" in beliefs(client, uid) and "chemistry" not in beliefs(client, uid)
    assert summaries(client, uid) == ["我喜欢物理"]


def test_undoing_a_message_said_in_both_sessions_keeps_the_other_sessions_word(client, uid):
    _, in_b = said_in_both(client, uid, "我喜欢物理", "我喜欢物理")  # the same words: one event, one belief
    before = beliefs(client, uid)["物理"]
    assert sorted((e.session_id, e.status) for e in client.events(f"u{uid}").events) == [(f"a{uid}", "live"),
                                                                                        (f"b{uid}", "merged")]
    assert [m.message_id for m in client.rollback(f"b{uid}").removed] == ["m1"]  # 撤回上一条 in session b
    wait_retracted(client, in_b.job_id)
    after = beliefs(client, uid)["物理"]
    assert after.rel_id == before.rel_id and after.confidence > 0.1  # session a's m1 still says it
    [event] = client.events(f"u{uid}").events  # session b's row is gone; a's holds the event alone
    assert (event.session_id, event.count, event.message_ids, event.summary) == (f"a{uid}", 1, ["m1"], "我喜欢物理")


def test_recall_in_a_session_finds_what_another_session_said_under_the_same_id(client, uid):
    """The question being answered now (session b's m1) is left out of recall; session a's m1 is the past."""
    said_in_both(client, uid, "My sister's name is Lily, she lives in 杭州", "What is my sister's name?")
    result = client.recall(user_id=f"u{uid}", query="What is my sister's name?", session_id=f"b{uid}")
    assert [(e.session_id, e.message_ids) for e in result.events][:1] == [(f"a{uid}", ["m1"])]
