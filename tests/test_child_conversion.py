"""A user who becomes a child has what is already held brought under child rules at once
(``Privacy.bring_under_child_rules``), through the real stack: working memory sealed (and still readable), events
type only, beliefs and reviews gone."""

from __future__ import annotations

import gzip
import threading
import time

import httpx
import numpy as np

from memory.archive import decode, user_prefix
from memory.episodic import ALL_STATUSES
from memory.graph import Status
from memory.services import maintenance
from memory.state import keys
from memory.userhash import user_hash
from tests.polling import wait_until
from tests.stacks import audit_records, wait_aof_rewrite

T = "default"
HEX_TO_ZH = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳"


def markers(uid: str) -> tuple[str, str]:
    """A Chinese and an English marker unique to one test, shaped so the rules make beliefs of them."""
    return "".join(HEX_TO_ZH[int(c, 16)] for c in uid[:4]), "Quokka" + "".join(chr(97 + int(c, 16)) for c in uid[:6])


def say(client, user, session, texts, start=0, ts=None):
    return [client.remember(user_id=user, session_id=session, message_id=f"m{i}", role=role, content=text,
                            client_ts=ts or time.time() - 100 + i).job_id
            for i, (role, text) in enumerate(texts, start)]


def session_values(rt, session_id: str) -> list[str]:
    """Every stored value (and field) of a session's keys, as Redis holds them."""
    out = []
    for key in keys.session(T, session_id).all():
        for field, value in rt.state.client.hgetall(key).items():
            out += [field, value]
    return out


def redis_values(rt) -> dict[str, list[str]]:
    """Every key of the whole Redis with its values (hash fields too)."""
    read = {"hash": lambda k: [x for kv in rt.state.client.hgetall(k).items() for x in kv],
            "list": lambda k: rt.state.client.lrange(k, 0, -1), "set": lambda k: list(rt.state.client.smembers(k)),
            "zset": lambda k: rt.state.client.zrange(k, 0, -1), "string": lambda k: [rt.state.client.get(k) or ""]}
    return {k: read.get(rt.state.client.type(k), lambda _: [])(k) for k in rt.state.client.scan_iter(count=1000)}


def files_holding(data_dir, needles: list[str]) -> list[str]:
    found = []
    for path in data_dir.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data += gzip.decompress(data)
        if any(n.encode() in data for n in needles):
            found.append(str(path.relative_to(data_dir)))
    return found


def set_child(stack, user):
    r = httpx.put(f"{stack.api_url}/v1/users/{user}/child", json={"child": True, "operator_id": "parent"}, timeout=60)
    r.raise_for_status()
    return r.json()


def assert_held_under_child_rules(stack, rt, client, user, zh, en, sessions):
    """What every conversion must leave: no plaintext in working memory, type-only events, no beliefs."""
    for session_id in sessions:
        raw = session_values(rt, session_id)
        assert not [v for v in raw if zh in v or en in v], session_id
        assert any("enc:v1:" in v for v in raw)
    rows = rt.episodic.store.dump(T, user, statuses=ALL_STATUSES, limit=10**6)
    assert rows
    for event, vector in rows:
        shown = rt.episodic.reveal(event)
        assert (shown.summary, shown.keywords, shown.text) == ("", [], ""), event.event_type
        assert event.tokens == [] and not np.any(vector)
    hits = client.recall(user_id=user, query=f"我叫什么？what is my name? {zh} {en}", include_text=True, k=20)
    assert hits.facts == [] and all(not h.summary and not h.keywords and not h.text for h in hits.events)
    profile = client.profile(user, include_inactive=True)
    assert profile.beliefs == [] and profile.open_reviews == []
    assert httpx.get(f"{stack.api_url}/v1/users/{user}/reviews").json() == []


def test_setting_child_mode_brings_what_is_held_under_child_rules(stack, runtime, client, uid):
    user, (zh, en) = f"grow{uid}", markers(uid)
    a, b, c = f"{user}-a", f"{user}-b", f"{user}-c"
    client.consent(user)
    reply = f"好的，王{zh}，" + "我记住了你喜欢数学，也记住了你的名字。" * 40  # cut in the window, kept whole
    texts_a = [("user", f"我叫王{zh}"), ("user", f"My name is {en}"), ("user", f"我喜欢{zh}数学"),
               ("user", f"I like {en}ball"), ("user", f"I can't stand {en}ball"), ("assistant", reply)]
    jobs = say(client, user, a, texts_a)
    jobs += say(client, user, b, [("user", f"今天{zh}和{en}一起去了博物馆"), ("user", f"我喜欢{zh}天文学")], start=10)
    jobs += say(client, user, c, [("user", "哈哈")], start=20, ts=time.time() - 40 * 86400)  # old small talk
    client.wait(jobs)
    undone = client.rollback(b)  # 撤回: m11 is kept only by an older snapshot now
    wait_until(lambda: client.job(jobs[-2]).state == "retracted", 30, "the undone message's retraction")
    runtime.maintenance.archive_user(T, user, maintenance.Report(), time.time())  # the small talk goes cold
    assert runtime.maintenance.archive.list(user_prefix(T, user))
    assert {b.relation for b in client.profile(user, include_inactive=True).beliefs} >= {"name", "likes"}
    assert client.profile(user).open_reviews  # "I like" then "I can't stand": both claims wait for a human
    assert any(zh in v for v in session_values(runtime, a))  # an adult's working memory is plaintext
    rewrites = runtime.state.client.info("persistence")["aof_rewrites"]

    assert set_child(stack, user)["child"] is True

    assert_held_under_child_rules(stack, runtime, client, user, zh, en, [a, b, c])
    assert [m.content for m in client.messages(a).messages][:5] == [t for _, t in texts_a[:5]]
    assert client.message(a, "m5").content == reply and client.messages(a).messages[5].truncated
    assert [m.content for m in client.messages(b, version=undone.version - 1).messages] == [
        f"今天{zh}和{en}一起去了博物馆", f"我喜欢{zh}天文学"]  # the rolled-back record, sealed and readable
    for name in runtime.maintenance.archive.list(user_prefix(T, user)):
        for r in decode(runtime.maintenance.archive.get(name)):
            event, vector = runtime.episodic.unarchived(T, user, r)
            shown = runtime.episodic.reveal(event)
            assert (shown.summary, shown.text, event.tokens) == ("", "", []) and not np.any(vector)
    assert runtime.semantic.store.relations(T, user, statuses=tuple(Status)) == []  # with their evidence
    leaks = {k: v for k, v in redis_values(runtime).items() if any(zh in x or en in x for x in v)}
    assert leaks == {}
    wait_aof_rewrite(runtime, rewrites)
    assert files_holding(stack.data_dir, [zh, en]) == []  # stores, -wal files, the AOF, archive, audit, logs

    def converted():
        return [r for r in audit_records(stack)
                if r["action"] == "child_mode.convert" and r["user"] == user_hash(runtime.user_hash_key, T, user)]

    [audit] = wait_until(converted, 30, "the conversion's audit record")
    assert audit["operator_id"] == "parent" and audit["sessions"] == 3 and audit["messages_sealed"] >= 9
    assert audit["full_texts_sealed"] == 1 and audit["events_stripped"] >= 7 and audit["archived_events_stripped"] == 1
    assert audit["beliefs_removed"] >= 3 and audit["reviews_removed"] >= 1

    later = say(client, user, a, [("user", f"我喜欢{zh}画画")], start=30)  # what comes next is a child's already
    client.wait(later)
    assert client.profile(user).beliefs == [] and client.messages(a).messages[-1].content == f"我喜欢{zh}画画"


def test_a_session_started_after_the_user_became_a_child_never_holds_their_text_in_plaintext(stack, runtime, client,
                                                                                           uid):
    """A session's first message is sealed before it is stored, not after: the user's policy is read for it each
    time (a flag remembered from their last session would store it in plaintext first, in Redis's append-only
    file too, and seal it only after the check that follows a session's start)."""
    user, (zh, en) = f"grown{uid}", markers(uid)
    client.wait(say(client, user, f"{user}-a", [("user", "你好 hello")]))  # an adult's session
    rewrites = runtime.state.client.info("persistence")["aof_rewrites"]
    set_child(stack, user)
    wait_aof_rewrite(runtime, rewrites)  # the conversion's rewrite: its files come and go while it runs
    text = f"我叫王{zh}, my name is {en}"
    say(client, user, f"{user}-b", [("user", text)])
    leaks = {k: v for k, v in redis_values(runtime).items() if any(zh in x or en in x for x in v)}
    assert leaks == {}
    assert files_holding(stack.data_dir, [zh, en]) == []  # Redis writes its append-only file before it answers
    assert any("enc:v1:" in v for v in session_values(runtime, f"{user}-b"))
    assert [m.content for m in client.messages(f"{user}-b").messages] == [text]


def test_appends_racing_the_conversion_are_all_kept_and_sealed(stack, runtime, client, uid):
    user, (zh, _) = f"race{uid}", markers(uid)
    session = f"{user}-s"
    client.consent(user)
    say(client, user, session, [("user", f"第{i}条{zh}") for i in range(15)])
    late: list[str] = []

    def keep_writing():
        for i in range(15, 30):
            late.append(say(client, user, session, [("user", f"第{i}条{zh}")], start=i)[0])

    writer = threading.Thread(target=keep_writing)
    writer.start()
    set_child(stack, user)
    writer.join()
    assert [m.content for m in client.messages(session).messages] == [f"第{i}条{zh}" for i in range(30)]
    assert not [v for v in session_values(runtime, session) if zh in v]
    client.wait(late)


def test_declaring_an_age_under_13_brings_what_is_held_under_child_rules(stack, runtime, client, uid):
    user, (zh, en) = f"told{uid}", markers(uid)
    session = f"{user}-s"
    client.consent(user)
    client.wait(say(client, user, session, [("user", f"我叫王{zh}"), ("user", f"My name is {en}"),
                                            ("user", f"我喜欢{zh}数学")]))
    assert client.profile(user, include_inactive=True).beliefs
    client.wait(say(client, user, session, [("user", "我今年10岁")], start=5))
    policy = client.policy(user)
    assert policy.child is True and "declared" in (policy.child_by or "")
    assert_held_under_child_rules(stack, runtime, client, user, zh, en, [session])
    assert [m.content for m in client.messages(session).messages] == [
        f"我叫王{zh}", f"My name is {en}", f"我喜欢{zh}数学", "我今年10岁"]
