"""Working memory through the HTTP API on a real Valkey: cleaning, truncation, ordering, versions,
rollback, retries, concurrent writers, restarts."""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from mneme_client import MnemeAPIError

from tests.metrics import sample


def post(client, uid, i, content="hello", role="user", ts=None, session=None, user=None, **kw):
    return client.remember(user_id=user or f"u{uid}", session_id=session or f"s{uid}", message_id=f"m{i}",
                           role=role, content=content, client_ts=ts if ts is not None else 1_700_000_000 + i, **kw)


def test_message_is_stored_clean_with_its_metadata(client, uid):
    accepted = post(client, uid, 1, "  我喜欢  物理\t\t<b>真的</b>\n第二行  ", device_id=f"phone-{uid}")
    view = client.messages(f"s{uid}")
    [m] = view.messages
    assert m.content == "我喜欢 物理 &lt;b&gt;真的&lt;/b&gt;\n第二行"
    assert (m.message_id, m.role, m.device_id, m.version) == ("m1", "user", f"phone-{uid}", accepted.version)
    assert m.client_ts == 1_700_000_001 and view.version == accepted.version == 1


def test_long_assistant_reply_is_cut_but_full_text_retrievable(client, uid):
    reply = "第一步，" + "速度是位移对时间的变化率。" * 60
    post(client, uid, 1, reply, role="assistant")
    [m] = client.messages(f"s{uid}").messages
    assert m.truncated and m.content.endswith("…[全文见历史]") and len(m.content) <= 500 + len("…[全文见历史]")
    assert client.message(f"s{uid}", "m1").content == reply
    post(client, uid, 2, "短" * 600)  # user messages are never cut
    assert client.messages(f"s{uid}").messages[1].content == "短" * 600


def test_a_session_starts_in_one_step(client, uid, stack):
    """The first message of a session is accepted in one Redis step, as every other is: the API reads the user's
    child flag first when it has not written to the session before, instead of a step that asks for it and runs
    again (a burst of new sessions cost the API twice as much per message)."""
    def appends() -> float:
        return sample(httpx.get(f"{stack.api_url}/metrics", timeout=10).text, "mneme_working_memory_ops_total",
                      op="append") or 0.0

    before = appends()
    post(client, uid, 1, "我叫小林，I just started learning 吉他")
    post(client, uid, 2, "第二条 second message")
    assert appends() - before == 2
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m1", "m2"]


def test_ordered_by_client_timestamp_not_arrival(client, uid):
    for i, ts in [(1, 100.0), (2, 300.0), (3, 200.0), (4, 50.0)]:
        post(client, uid, i, f"msg {i}", ts=1_700_000_000 + ts)
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m4", "m1", "m3", "m2"]


def test_a_clock_slightly_ahead_is_clamped_and_a_far_future_timestamp_refused(client, uid):
    accepted = post(client, uid, 1, ts=time.time() + 3600)  # a device clock an hour fast
    assert accepted.client_ts <= time.time() + 301
    with pytest.raises(MnemeAPIError) as err:
        post(client, uid, 2, ts=time.time() + 10 * 365 * 86400)
    assert err.value.status == 422 and "client_ts" in err.value.message
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m1"]  # nothing of it was kept


def test_window_keeps_the_last_n_messages(client, uid, stack):
    n = stack.settings.window_size
    for i in range(n + 5):
        post(client, uid, i, f"message {i}")
    ids = [m.message_id for m in client.messages(f"s{uid}").messages]
    assert len(ids) == n and ids[0] == "m5" and ids[-1] == f"m{n + 4}"
    late = post(client, uid, 999, "written long ago", ts=1_600_000_000)  # older than the whole window
    assert not late.in_window and client.job(late.job_id)  # not in the window, still sent to long-term memory


def test_undo_last_and_rollback_restore_whole_snapshots(client, uid):
    for i in range(1, 4):
        post(client, uid, i, f"第{i}条")
    undone = client.rollback(f"s{uid}")  # 撤回上一条
    assert [m.message_id for m in undone.removed] == ["m3"] and undone.restored is None and undone.version == 4
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m1", "m2"]
    back = client.rollback(f"s{uid}", to_version=1)
    assert back.version == 5 and back.restored == 1 and [m.message_id for m in back.removed] == ["m2"]
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m1"]
    assert [m.message_id for m in client.messages(f"s{uid}", version=3).messages] == ["m1", "m2", "m3"]
    client.rollback(f"s{uid}", to_version=3)  # rolling forward again is a rollback too
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m1", "m2", "m3"]
    post(client, uid, 4, "after rollbacks")
    assert client.messages(f"s{uid}").version == 7


def test_old_versions_beyond_the_kept_range_answer_404(client, uid, stack):
    kept = stack.settings.versions_kept
    for i in range(kept + 3):
        post(client, uid, i)
    with pytest.raises(MnemeAPIError) as err:
        client.rollback(f"s{uid}", to_version=1)
    assert err.value.status == 404 and "no longer kept" in err.value.message


def test_retry_with_same_message_id_is_harmless_and_reuse_is_refused(client, uid):
    first = post(client, uid, 1, "same")
    again = post(client, uid, 1, "same")
    assert again.duplicate and again.job_id == first.job_id and again.version == first.version
    assert len(client.messages(f"s{uid}").messages) == 1
    with pytest.raises(MnemeAPIError) as err:
        post(client, uid, 1, "different content")
    assert err.value.status == 409 and "message_id" in err.value.message


def test_a_session_belongs_to_one_user(client, uid):
    post(client, uid, 1)
    with pytest.raises(MnemeAPIError) as err:
        post(client, uid, 2, user="someone_else")
    assert err.value.status == 409


def test_concurrent_writers_never_lose_a_message(client, uid, stack):
    def write(i):
        from mneme_client import MnemeClient

        with MnemeClient(stack.api_url) as c:
            return post(c, uid, i, f"并发 {i}", ts=1_700_000_000 + i % 7)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(write, range(40)))
    assert sorted(r.version for r in results) == list(range(1, 41))  # each write its own version
    view = client.messages(f"s{uid}")
    assert sorted(m.message_id for m in view.messages) == sorted(f"m{i}" for i in range(40))
    assert [m.client_ts for m in view.messages] == sorted(m.client_ts for m in view.messages)


def test_session_keys_carry_a_ttl(client, uid, runtime):
    from memory.state import keys

    post(client, uid, 1)
    for key in keys.session(runtime.settings.tenant, f"s{uid}").all():
        if runtime.state.client.exists(key):
            assert 0 < runtime.state.client.ttl(key) <= runtime.settings.session_ttl_s


def test_working_memory_survives_api_and_redis_restarts(client, uid, stack):
    post(client, uid, 1, "记住我")
    stack.stop_one("api")
    stack.start_one("api")
    stack.wait_ready(wait_embedder=False)
    assert [m.content for m in client.messages(f"s{uid}").messages] == ["记住我"]
    stack.stop_one("redis")  # a clean shutdown writes and syncs the AOF (appendfsync is everysec otherwise)
    stack.start_one("redis")
    stack.wait_ready(wait_embedder=False)
    assert [m.content for m in client.messages(f"s{uid}").messages] == ["记住我"]
    assert post(client, uid, 2, "still writable").version == 2


def test_undo_takes_the_latest_message_each_time_and_version_zero_is_the_empty_session(client, uid):
    post(client, uid, 1)
    assert client.rollback(f"s{uid}").restored is None  # 撤回: back to the empty session
    assert client.messages(f"s{uid}").messages == []
    with pytest.raises(MnemeAPIError) as err:  # undo does not toggle: a second one has nothing to take
        client.rollback(f"s{uid}")
    assert err.value.status == 409 and "nothing to undo" in err.value.message
    assert client.messages(f"s{uid}").version == 2
    assert client.messages(f"s{uid}", version=0).messages == []


def test_post_can_return_the_window_in_the_same_step(client, uid):
    """What an agent needs for its next prompt, without a second call: zh and en, in client-time order,
    and for a retried message_id too."""
    post(client, uid, 1, "我喜欢物理", ts=1_700_000_010)
    late = post(client, uid, 2, "I prefer short answers", ts=1_700_000_005, window=True)
    assert [m.content for m in late.window.messages] == ["I prefer short answers", "我喜欢物理"]
    assert late.window.head == late.version == client.messages(f"s{uid}").head
    again = post(client, uid, 2, "I prefer short answers", ts=1_700_000_005, window=True)
    assert again.duplicate and again.window == late.window
    assert post(client, uid, 3, "好的").window is None  # only when asked


def test_the_turn_before_a_message_is_the_one_before_it_in_the_window(client, uid, runtime):
    """What a reply answers (its context for embedding): the message before it in the window's order (client
    time, not arrival); none for the first, for one taken back or unknown, or in a session that is gone."""
    for i, ts in [(1, 100.0), (2, 300.0), (3, 200.0), (4, 400.0)]:
        post(client, uid, i, f"第{i}条 message {i}", ts=1_700_000_000 + ts, role="assistant" if i % 2 else "user")
    client.rollback(f"s{uid}")  # takes m4 back
    asked = [("default", f"s{uid}", m) for m in ("m1", "m3", "m2", "m4", "nope")] + [("default", f"gone{uid}", "m1")]
    turns = runtime.working.turns_before(asked)
    assert [t.message_id if t else None for t in turns] == [None, "m1", "m3", None, None, None]
    assert turns[1].content == "第1条 message 1" and turns[1].role == "assistant"


def test_a_kept_vector_comes_back_with_its_turn_and_goes_with_what_takes_that_turn_back(client, uid, runtime):
    """The vector an embed worker kept of a session's newest turn (for the next turn's context, on any worker):
    found by that turn, one a session (a later turn's is not replaced by an earlier one's), for
    ``context_vector_ttl_s``; an undo, a taken-back message, child mode and the session's deletion drop it,
    and none is kept for a message taken back or in a child's session."""
    from memory.state import keys

    working, session = runtime.working, f"s{uid}"
    vec = keys.session("default", session).vec
    for i in (1, 2, 3):
        post(client, uid, i, f"第{i}条 message {i}", role="assistant" if i % 2 == 0 else "user")

    def before(message_id):  # the vector kept of the turn before this message
        [turn] = working.turns_before([("default", session, message_id)])
        return working.kept_vectors([("default", session, turn.seq)])[0] if turn else ""

    working.keep_vectors([("default", session, "m1", "v1")])
    assert before("m2") == "v1" and before("m3") == ""
    assert 0 < runtime.state.client.ttl(vec) <= runtime.settings.context_vector_ttl_s
    working.keep_vectors([("default", session, "m2", "v2")])
    working.keep_vectors([("default", session, "m1", "v1 again")])  # a worker late with an older turn's
    assert (before("m2"), before("m3")) == ("", "v2")
    client.rollback(session)  # takes m3 back
    assert not runtime.state.client.exists(vec)
    working.keep_vectors([("default", session, "m3", "v3")])  # taken back: nothing of it is kept
    assert not runtime.state.client.exists(vec)
    working.keep_vectors([("default", session, "m2", "v2")])
    working.take_back("default", session, "m1")
    assert not runtime.state.client.exists(vec)
    working.keep_vectors([("default", session, "m2", "v2")])
    working.mark_child("default", f"u{uid}", True)
    assert not runtime.state.client.exists(vec)
    working.keep_vectors([("default", session, "m2", "v2")])  # embedded as the switch came: not kept either
    assert not runtime.state.client.exists(vec)
    working.mark_child("default", f"u{uid}", False)
    working.keep_vectors([("default", session, "m2", "v2")])
    client.delete_session(session)
    assert not runtime.state.client.exists(vec)


# --- many messages a request (POST /v1/messages/batch) ------------------------------------------------------

def said(uid, i, content, session=None, role="user", ts=None):
    return {"user_id": f"u{uid}", "session_id": session or f"s{uid}", "message_id": f"m{i}", "role": role,
            "content": content, "client_ts": ts if ts is not None else 1_700_000_000 + i}


def test_a_batch_of_a_turn_and_of_another_session_is_accepted_in_order_and_remembered(client, uid):
    batch = [said(uid, 1, "我叫林小雨，我喜欢天文学"),
             said(uid, 2, "Nice to meet you! Astronomy is great.", role="assistant"),
             said(uid, 3, "I also love 化学 and chemistry labs", session=f"s{uid}-b")]
    answers = client.remember_many(batch).accepted
    assert [(a.session_id, a.message_id, a.duplicate) for a in answers] == [
        (f"s{uid}", "m1", False), (f"s{uid}", "m2", False), (f"s{uid}-b", "m3", False)]
    assert [m.content for m in client.messages(f"s{uid}").messages] == [batch[0]["content"], batch[1]["content"]]
    assert [j.state for j in client.wait([a.job_id for a in answers])] == ["done"] * 3
    found = client.recall(user_id=f"u{uid}", query="化学实验")
    assert "m3" in found.events[0].message_ids
    assert ("likes", "天文学") in {(f.relation, f.object) for f in found.facts}


def test_a_batch_sent_again_is_answered_duplicate_and_changes_nothing(client, uid):
    batch = [said(uid, i, f"第{i}条 message {i}") for i in range(3)]
    first = client.remember_many(batch).accepted
    again = client.remember_many(batch).accepted
    assert [a.duplicate for a in again] == [True] * 3 and [a.job_id for a in again] == [a.job_id for a in first]
    assert client.messages(f"s{uid}").version == first[-1].version == 3


@pytest.mark.parametrize(("bad", "status", "says"), [
    ({"content": " \t "}, 400, "messages[1]: content is empty after cleaning"),
    ({"client_ts": "yesterday"}, 422, "client_ts"),
    ({"role": "robot"}, 422, "role"),
])
def test_one_invalid_message_refuses_the_batch_naming_it_and_accepts_none(client, uid, bad, status, says):
    batch = [said(uid, 0, "我喜欢物理"), said(uid, 1, "I like physics") | bad, said(uid, 2, "还有数学")]
    with pytest.raises(MnemeAPIError) as err:
        client.remember_many(batch)
    assert err.value.status == status and says in err.value.message
    assert "物理" not in err.value.message and "physics" not in err.value.message  # no user content in errors
    with pytest.raises(MnemeAPIError) as gone:
        client.messages(f"s{uid}")
    assert gone.value.status == 404  # nothing of the batch was kept


def test_a_conflict_midway_names_the_message_and_a_mended_batch_sent_again_completes(client, uid):
    post(client, uid, 1, "原来的内容")
    batch = [said(uid, 0, "第零条"), said(uid, 1, "另一个内容 reused id"), said(uid, 2, "第二条")]
    with pytest.raises(MnemeAPIError) as err:
        client.remember_many(batch)
    assert err.value.status == 409 and err.value.message.startswith("messages[1]: ")
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m0", "m1"]
    batch[1] = said(uid, 1, "原来的内容")
    answers = client.remember_many(batch).accepted
    assert [a.duplicate for a in answers] == [True, True, False]
    assert [m.message_id for m in client.messages(f"s{uid}").messages] == ["m0", "m1", "m2"]


def test_a_batch_holds_one_to_a_hundred_messages(client, uid):
    for size in (0, 101):
        with pytest.raises(MnemeAPIError) as err:
            client.remember_many([said(uid, i, f"msg {i}") for i in range(size)])
        assert err.value.status == 422 and "messages" in err.value.message
    assert len(client.remember_many([said(uid, i, f"msg {i}") for i in range(100)]).accepted) == 100
