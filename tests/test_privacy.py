"""Forgetting and privacy on a stack with the product defaults (long-term memory needs consent):
consent, child mode, erasure that leaves nothing behind, cold archive, noise, feedback and metrics."""

import gzip
import hashlib
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from mneme_client import MnemeClient

import beat_schedule
from memory import ids, pipeline
from memory.archive import decode, user_prefix
from memory.claims.rule import CONFIDENCE
from memory.mneme import Mneme
from memory.settings import Settings
from memory.state import keys
from memory.state.broker import job_ids_of
from tests.polling import wait_until
from tests.stacks import audit_records, drain, running_stack, wait_aof_rewrite
from workers.api.messages import retraction_task
from workers.celery_app import ROUTES, create_celery


@pytest.fixture(scope="module")
def pstack(tmp_path_factory):
    with running_stack(tmp_path_factory, "privacy") as s:  # the product defaults: consent required
        yield s


@pytest.fixture(scope="module")
def prt(pstack) -> Mneme:
    return Mneme(pstack.settings)


@pytest.fixture
def api(pstack):
    with MnemeClient(pstack.api_url) as c:
        yield c


def consent(pstack, user, granted=True):
    r = httpx.put(f"{pstack.api_url}/v1/users/{user}/consent", json={"long_term": granted, "operator_id": "agent"})
    r.raise_for_status()
    return r.json()


def say(api, user, texts, session=None, start=0, ts=None, device=None):
    jobs = [api.remember(user_id=user, session_id=session or f"{user}-s", message_id=f"m{i}", role=role,
                         content=text, client_ts=ts or time.time() - 100 + i, device_id=device).job_id
            for i, (role, text) in enumerate(texts, start)]
    return api.wait(jobs, timeout=60)


def profile(pstack, user):
    return httpx.get(f"{pstack.api_url}/v1/users/{user}/profile").json()["beliefs"]


def test_long_term_memory_is_off_until_the_user_opts_in(pstack, api, uid):
    user = f"u{uid}"
    [job] = say(api, user, [("user", "我今年17岁，我喜欢物理")])
    assert job.state == "done" and "consent" in job.note
    assert [m.content for m in api.messages(f"{user}-s").messages] == ["我今年17岁，我喜欢物理"]  # working memory
    result = api.recall(user_id=user, query="我几岁")
    assert result.events == [] and result.facts == [] and "long_term" in result.degraded
    assert consent(pstack, user)["long_term"] is True
    say(api, user, [("user", "我今年17岁，我喜欢物理")], start=1)
    assert {(b["relation"], b["object"]) for b in profile(pstack, user)} == {("age", "17"), ("likes", "物理")}
    consent(pstack, user, granted=False)
    assert api.recall(user_id=user, query="我几岁").facts == []  # opting out hides it at once
    actions = [a["action"] for a in audit_records(pstack) if a["operator_id"] == "agent" and a["action"].startswith(
        "consent")]
    assert actions[-2:] == ["consent.grant", "consent.revoke"]


def test_a_child_gets_no_graph_content_free_events_and_an_encrypted_window(pstack, prt, api, uid):
    user = f"kid{uid}"
    consent(pstack, user)
    [job] = say(api, user, [("user", f"我今年10岁，我叫小明{uid}")])
    policy = httpx.get(f"{pstack.api_url}/v1/users/{user}/consent").json()
    assert policy["child"] is True and "declared" in policy["child_by"]
    assert profile(pstack, user) == []  # not even the age: no graph writes for a child
    [stored] = prt.episodic.store.get("default", user, job.event_ids[:1])
    shown = prt.episodic.reveal(stored)
    assert (shown.summary, shown.keywords, shown.text) == ("", [], "") and stored.event_type == "age_declaration"
    say(api, user, [("user", f"我最喜欢的老师是王老师{uid}")], start=1)
    raw = prt.state.client.hvals(keys.session("default", f"{user}-s").msg)
    assert any("enc:v1:" in r for r in raw) and not any(f"王老师{uid}" in r for r in raw)
    payloads = [prt.state.client.hget(keys.job(j.job_id), "payload") for j in api.wait([job.job_id])]
    assert all(f"王老师{uid}" not in (p or "") for p in payloads)
    assert api.messages(f"{user}-s").messages[-1].content == f"我最喜欢的老师是王老师{uid}"  # readable via the API


def test_erasure_leaves_nothing_of_the_user_in_any_store(pstack, prt, api, uid):
    user, secret, marker = f"erase{uid}", f"秘密{uid}", f"Quokka{uid}"  # a Chinese and an English marker
    consent(pstack, user)
    say(api, user, [("user", f"我叫{secret}"), ("user", f"I like {secret}ball"),
                    ("user", f"I can't stand {secret}ball"), ("assistant", f"好的，{secret}，我记住了。"),
                    ("user", f"My best friend is called {marker}, 我们一起学{marker}语")],
        device=f"pad-{uid}")
    httpx.put(f"{pstack.api_url}/v1/users/{user}/beliefs",  # a correction the user typed in
              json={"relation": "likes", "object": f"{marker}跑酷", "operator_id": "user"}).raise_for_status()
    say(api, user, [("user", "哈哈")], session=f"{user}-old", ts=time.time() - 40 * 86400, start=10)
    hit = api.recall(user_id=user, query=f"我叫什么？{secret}").events[0]  # a query and useful feedback hold it too
    httpx.post(f"{pstack.api_url}/v1/feedback", json={"user_id": user, "event_id": hit.event_id, "useful": True,
                                                       "query": f"who is {marker}? 我叫什么"}).raise_for_status()
    create_celery(pstack.settings).send_task("memory.archive", kwargs={})
    deadline = time.monotonic() + 30
    while not list((pstack.data_dir / "archive").rglob("*.jsonl.gz")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert httpx.get(f"{pstack.api_url}/v1/users/{user}/reviews").json()  # a review holds both claims
    pstack.stop_one("worker-pipeline")  # work queued but not yet done when the erasure lands
    late = api.remember(user_id=user, session_id=f"{user}-s", message_id="late", role="user",
                        content=f"我今年{uid[:2]}岁，{secret}还在吗")
    receipt = httpx.delete(f"{pstack.api_url}/v1/users/{user}", params={"operator_id": "dpo"}).json()
    pstack.start_one("worker-pipeline")
    pstack.wait_ready(wait_embedder=False)
    assert receipt["complete"] and not any(receipt["remaining"].values())
    removed = receipt["removed"]
    assert removed["episodic_events"] >= 4 and removed["graph_relations"] >= 2 and removed["archive_objects"] >= 1
    assert removed["sessions"] == 2 and removed["keys"] == 1 and removed["devices"] == 1 and removed["reviews"] == 1
    assert removed["feedback_pairs"] == 1 and removed["policy"] == 1
    drain(prt)  # the late message's task has run (or been dropped): nothing of it may come back
    assert prt.state.jobs.states([late.job_id])[late.job_id] in (None, "dropped")  # erased, or dropped: never done
    assert profile(pstack, user) == [] and api.recall(user_id=user, query=secret).events == []
    wait_aof_rewrite(prt)
    rewrites = prt.state.client.info("persistence")["aof_rewrites"]
    sweep = prt.privacy.sweep()  # the hourly sweeper: verifies, and rewrites the AOF now the queue has drained
    assert sweep["checked"] >= 1 and sweep["incomplete"] == 0
    wait_aof_rewrite(prt, after=rewrites)
    leaks = [str(p.relative_to(pstack.data_dir)) for p in pstack.data_dir.rglob("*")
             if p.is_file() and _contains(p, [secret.encode(), marker.encode()])]
    assert leaks == []  # no content anywhere: stores, AOF, archive, audit log, key file, logs, metrics files
    # the raw id is left only in the sweeper's work list, until it has verified the erasure after 24 h
    holders = [k for k in prt.state.client.scan_iter(count=1000) if _redis_mentions(prt, k, user)]
    assert holders == [keys.erasing("default")]
    for key in prt.state.client.scan_iter(count=1000):
        kind = prt.state.client.type(key)
        r = prt.state.client
        values = (r.hvals(key) if kind == "hash" else r.lrange(key, 0, -1) if kind == "list"
                  else [prt.state.client.get(key)] if kind == "string" else [])
        assert not any(secret in (v or "") or marker in (v or "") for v in values), key
    assert any(a["action"] == "user.erase" and a["operator_id"] == "dpo" for a in audit_records(pstack))


def test_a_write_that_read_its_work_before_an_erasure_keeps_nothing_after_it(pstack, prt, api, uid):
    """The race the red team found: an embed batch reads its messages (the user not yet erased), the erasure
    answers complete, then the batch writes. The write checks the tombstone again and keeps nothing."""
    user = f"race{uid}"
    consent(pstack, user)
    pstack.stop_one("worker-embed")  # the batch is run here, step by step, around the erasure
    try:
        jobs = [api.remember(user_id=user, session_id=f"{user}-s", message_id=f"m{i}", role="user",
                             content=f"我喜欢第{i}种水果 and fruit number {i}", client_ts=time.time() - 10 + i).job_id
                for i in range(3)]
        wait_until(lambda: {j for m in prt.state.client.lrange("embed", 0, -1) for j in job_ids_of(m)} >= set(jobs),
                   60, "every message extracted, its embedding queued")
        items = pipeline.embed_items(prt, prt.state.jobs.inputs(jobs))
        embedded = pipeline.embed_vectors(prt, pipeline.embed_inputs(prt, items))  # read before the erasure
        receipt = httpx.delete(f"{pstack.api_url}/v1/users/{user}", params={"operator_id": "dpo"}).json()
        assert receipt["complete"]
        pipeline.store_embedded(prt, embedded)  # ... and written after it
        assert not any(prt.privacy.verify("default", user).values())
        assert set(prt.state.jobs.states(jobs).values()) <= {None, "dropped"}
    finally:
        pstack.start_one("worker-embed")
        pstack.wait_ready(wait_embedder=False)


def test_an_erasure_waits_for_a_write_under_way_before_it_says_complete(pstack, prt, api, uid):
    user = f"lease{uid}"
    consent(pstack, user)
    say(api, user, [("user", "我喜欢猕猴桃")])
    with ThreadPoolExecutor(1) as pool:
        with prt.state.policies.writing([("default", user)]):  # a store write for the user under way
            erasing = pool.submit(lambda: httpx.delete(f"{pstack.api_url}/v1/users/{user}",
                                                       params={"operator_id": "dpo"}, timeout=60).json())
            wait_until(lambda: prt.state.policies.erased_after("default", user, 0.0), 30, "the tombstone")
            wait_until(lambda: prt.episodic.count("default", user) == 0, 30, "the first pass")
            assert not erasing.done()  # it waits for the write
        receipt = erasing.result(timeout=60)
    assert receipt["complete"] and not any(receipt["remaining"].values())


CITIES = ["北京", "上海", "广州", "深圳", "杭州", "苏州", "南京", "成都", "重庆", "武汉", "西安", "天津", "长沙"]


def _digests(text):
    """What a store might keep of ``text`` that a dictionary could match: its hex digests and their prefixes."""
    full = [hashlib.new(name, text.encode("utf-8")).hexdigest() for name in ("sha256", "sha1", "md5")]
    return {d[:n] for d in full for n in (16, 24, 32, len(d))}


def test_no_store_keeps_a_hash_a_dictionary_of_likely_messages_reverses(pstack, prt, api, uid):
    kid, adult = f"kidhash{uid}", f"adulthash{uid}"
    for user in (kid, adult):
        consent(pstack, user)
    said = {kid: ["我今年9岁", "我住在杭州"], adult: ["我住在苏州", "我今年35岁"]}
    for user, texts in said.items():
        say(api, user, [("user", text) for text in texts])
    assert httpx.get(f"{pstack.api_url}/v1/users/{kid}/consent").json()["child"] is True
    dictionary = [f"我今年{n}岁" for n in range(1, 100)] + [f"我住在{c}" for c in CITIES]
    digests = {d: text for text in dictionary for d in _digests(text)}
    pattern = re.compile(rb"[0-9a-f]{16,64}")
    wait_aof_rewrite(prt)  # the append-only file keeps what came before child mode until it is rewritten (the
    rewrites = prt.state.client.info("persistence")["aof_rewrites"]  # conversion asks, the hourly sweep too)
    prt.state.rewrite_append_only_file()
    wait_aof_rewrite(prt, after=rewrites)

    def reversed_in(data: bytes) -> set[str]:
        return {digests[m] for m in (g.decode() for g in pattern.findall(data)) for m in (m, m[:16], m[:24], m[:32])
                if m in digests}

    stores = {p: reversed_in(p.read_bytes() + (gzip.decompress(p.read_bytes()) if p.name.endswith(".gz") else b""))
              for p in pstack.data_dir.rglob("*") if p.is_file()}
    long_term = {str(p.relative_to(pstack.data_dir)): found for p, found in stores.items()
                 if found and "redis" not in p.parts}
    assert long_term == {}  # episodic rows, graph, archive, audit, logs: nothing a dictionary matches
    # Redis holds an adult's window as it is (working memory, text and all); of a child's nothing a dictionary
    # matches
    in_redis = {str(p.relative_to(pstack.data_dir)): found for p, found in stores.items() if "redis" in p.parts}
    for key in prt.state.client.scan_iter(count=1000):
        in_redis[key] = {t for v in _values(prt, key) for t in reversed_in(v.encode())}
    assert not set().union(*in_redis.values()) & set(said[kid])


def _values(prt, key) -> list[str]:
    r = prt.state.client
    kind = r.type(key)
    return {"hash": lambda: r.hvals(key), "list": lambda: r.lrange(key, 0, -1), "set": lambda: list(r.smembers(key)),
            "zset": lambda: r.zrange(key, 0, -1), "string": lambda: [r.get(key) or ""]}.get(kind, list)()


def _redis_mentions(prt, key, needle) -> bool:
    kind = prt.state.client.type(key)
    values = {"hash": lambda: [*prt.state.client.hkeys(key), *prt.state.client.hvals(key)],
              "list": lambda: prt.state.client.lrange(key, 0, -1), "set": lambda: list(prt.state.client.smembers(key)),
              "zset": lambda: prt.state.client.zrange(key, 0, -1), "string": lambda: [prt.state.client.get(key) or ""]}
    return needle in key or any(needle in v for v in values.get(kind, list)())


def _contains(path, needles) -> bool:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data += gzip.decompress(data)
    return any(n in data for n in needles)


def test_old_small_talk_moves_to_cold_storage_and_can_come_back(pstack, prt, api, uid):
    user = f"cold{uid}"
    consent(pstack, user)
    [job] = say(api, user, [("user", "哈哈")], ts=time.time() - 45 * 86400)
    [fresh] = say(api, user, [("user", "我喜欢天文学")], start=1)

    report = prt.maintenance.run(prt.maintenance.archive_user, dry_run=True)
    assert report.events >= 1 and prt.episodic.store.get("default", user, job.event_ids)  # dry run: still hot
    prt.maintenance.run(prt.maintenance.archive_user)
    prt.maintenance.run(prt.maintenance.archive_user)  # twice is harmless
    assert prt.episodic.store.get("default", user, job.event_ids) == []
    assert prt.episodic.store.get("default", user, fresh.event_ids)  # recent and meaningful: stays
    [name] = prt.maintenance.archive.list(user_prefix("default", user))
    [record] = decode(prt.maintenance.archive.get(name))
    assert record["event_type"] == "small_talk" and "哈哈" not in json.dumps(record, ensure_ascii=False)
    stored = gzip.decompress(prt.maintenance.archive.get(name)).decode()
    assert user not in stored and f"{user}-s" not in stored and '"default"' not in stored  # no raw id inside
    assert prt.maintenance.restore_user("default", user) == 1
    [back] = prt.episodic.store.get("default", user, job.event_ids)
    assert prt.episodic.reveal(back).text == "哈哈"


def test_the_same_type_five_times_a_week_is_noise(pstack, prt, api, uid):
    user = f"noisy{uid}"
    consent(pstack, user)
    jobs = say(api, user, [("user", t) for t in ["点了提交没反应", "上传又失败了", "打不开了", "又报错了", "还是用不了",
                                                  "我喜欢几何", "The bus was late today", "We repainted the kitchen",
                                                  "My cousin moved to Lyon", "The exam is on Friday",
                                                  "I finished the novel"]])

    prt.maintenance.run(prt.maintenance.downweight_noise)
    events = {e.event_type: e for e in prt.episodic.store.get("default", user, [i for j in jobs for i in j.event_ids])}
    assert events["operation_failure"].noise == pytest.approx(0.3) and events["preference"].noise == 1.0
    assert events["statement"].noise == 1.0  # what an active user says many times a week is not noise
    hits = api.recall(user_id=user, query="提交没反应", k=5).events
    hit = next(h for h in hits if h.event_type == "operation_failure")
    assert hit.why["noise"] == pytest.approx(0.3)


def test_a_user_can_delete_all_events_of_one_type(pstack, prt, api, uid):
    user = f"del{uid}"
    consent(pstack, user)
    say(api, user, [("user", "哈哈"), ("user", "我喜欢化学")])
    r = httpx.delete(f"{pstack.api_url}/v1/users/{user}/events", params={"event_type": "small_talk"})
    assert r.json()["deleted_events"] == 1 and r.json()["event_type"] == "small_talk"
    assert {h.event_type for h in api.recall(user_id=user, query="哈哈 化学", k=5).events} == {"preference"}


def test_deleting_a_type_re_scores_the_beliefs_its_messages_stood_for_and_says_so(pstack, prt, api, uid):
    user = f"prov{uid}"
    consent(pstack, user)
    say(api, user, [("user", "I like chemistry"), ("user", "I don't like chemistry"), ("user", "I love chemistry")])
    beliefs = {(b.relation, b.object): b for b in api.profile(user).beliefs}
    likes, dislikes = beliefs[("likes", "chemistry")], beliefs[("dislikes", "chemistry")]
    like = CONFIDENCE["likes"]
    assert likes.stored_confidence == pytest.approx(0.3 * like / 2 + 0.7 * like)  # m2's counter-evidence halved m1's
    r = httpx.delete(f"{pstack.api_url}/v1/users/{user}/events", params={"event_type": "dislike"})
    assert r.status_code == 200
    assert r.json() == {"event_type": "dislike", "session_id": None, "purposes": [], "deleted_events": 1,
                        "archived_events": 0, "messages": ["m1"], "beliefs_removed": [dislikes.rel_id],
                        "beliefs_rescored": [likes.rel_id], "beliefs_restored": []}
    after = {(b.relation, b.object): b for b in api.profile(user).beliefs}
    assert ("dislikes", "chemistry") not in after  # only the deleted message said it
    assert after[("likes", "chemistry")].confidence == pytest.approx(like, abs=0.01)  # as if m2 was never said
    assert "deleted with the dislike events" in after[("likes", "chemistry")].why
    assert "dislike" not in {h.event_type for h in api.recall(user_id=user, query="chemistry", k=5).events}


def test_deleting_a_session_removes_it_everywhere_and_follows_provenance(pstack, prt, api, uid):
    user, gone, kept = f"sess{uid}", f"sess{uid}-a", f"sess{uid}-b"
    consent(pstack, user)
    say(api, user, [("user", "I like chemistry"), ("user", "我今年16岁")], session=gone)
    say(api, user, [("user", "I love chemistry")], session=kept, start=10)
    beliefs = {(b.relation, b.object): b for b in api.profile(user).beliefs}
    likes, age = beliefs[("likes", "chemistry")], beliefs[("age", "16")]
    r = httpx.delete(f"{pstack.api_url}/v1/sessions/{gone}", params={"operator_id": "support-agent"})
    assert r.status_code == 200
    receipt = r.json()
    assert (receipt["session_id"], sorted(receipt["messages"]), receipt["deleted_events"]) == (gone, ["m0", "m1"], 2)
    assert (receipt["beliefs_removed"], receipt["beliefs_rescored"]) == ([age.rel_id], [likes.rel_id])
    after = {(b.relation, b.object): b for b in api.profile(user).beliefs}
    assert ("age", "16") not in after and after[("likes", "chemistry")].message_ids == ["m10"]
    assert {h.session_id for h in api.recall(user_id=user, query="chemistry 16岁", k=5).events} == {kept}
    assert api.messages(gone).messages == [] and api.messages(kept).messages
    job = ids.job_id("default", gone, "m1")  # memory.retract, queued once the deletion forgot them, ends it
    wait_until(lambda: api.job(job).state == "retracted", 30, "the deleted session's jobs retracted")
    held = json.dumps([prt.state.client.hgetall(k) for k in keys.session("default", gone).all()
                       if prt.state.client.type(k) == "hash"], ensure_ascii=False)
    assert "16岁" not in held and "chemistry" not in held  # no content left of it in Redis
    r = httpx.post(f"{pstack.api_url}/v1/messages", json={"user_id": user, "session_id": gone, "message_id": "m1",
                                                         "role": "user", "content": "我今年16岁", "client_ts": 1e9})
    assert r.status_code == 409  # its ids are not taken again
    assert httpx.delete(f"{pstack.api_url}/v1/sessions/nosuch{uid}").status_code == 404
    audit = audit_records(pstack)
    [record] = [a for a in audit if a["action"] == "session.delete" and a.get("session_id") == gone]
    assert record["operator_id"] == "support-agent" and record["beliefs_removed"] == [age.rel_id]


def test_a_deletion_hands_its_retraction_to_the_workers_only_once_it_has_forgotten(pstack, prt, api, uid):
    """A deletion's receipt lists every belief it removed however fast the workers are: the request forgets the
    messages before their ``memory.retract`` goes onto the broker (sent first, a worker could remove a belief
    before the request did, and the receipt would not list it — seen once on a busy box)."""
    user = f"ord{uid}"
    consent(pstack, user)
    say(api, user, [("user", "我讨厌排队")], session=f"{user}-a")
    # m10, not m0: long-term memory keeps provenance by message id per user, not per session
    say(api, user, [("user", "I hate waiting in line")], session=f"{user}-b", start=10)
    held_when_sent = []

    def task(session):
        def build(message_ids, user_id):
            held_when_sent.append(sorted((b.relation, b.object) for b in prt.semantic.profile("default", user)))
            return retraction_task("default", session)(message_ids, user_id)
        return build

    one = prt.privacy.delete_message("default", f"{user}-a", "m0", "user", task=task(f"{user}-a"))
    assert one.messages == ["m0"] and len(one.beliefs_removed) == 1  # dislikes 排队
    whole = prt.privacy.delete_session("default", f"{user}-b", "user", task=task(f"{user}-b"))
    assert whole.messages == ["m10"] and len(whole.beliefs_removed) == 1  # dislikes waiting in line
    assert held_when_sent == [[("dislikes", "waiting in line")], []]  # each sent after its own forgetting
    for session, message in ((f"{user}-a", "m0"), (f"{user}-b", "m10")):
        job = ids.job_id("default", session, message)
        wait_until(lambda job=job: api.job(job).state == "retracted", 30, "the retraction ran")


def test_feedback_moves_weights_and_feeds_the_interference_rate(pstack, prt, api, uid):
    user = f"fb{uid}"
    consent(pstack, user)
    say(api, user, [("user", "我喜欢用动画学物理"), ("user", "今天食堂的饭不好吃")])
    before = httpx.get(f"{pstack.api_url}/v1/metrics/product").json()
    hits = api.recall(user_id=user, query="怎么学物理？食堂的饭呢？", k=2).events
    bad = next(h for h in hits if "食堂" in h.summary)
    r = httpx.post(f"{pstack.api_url}/v1/feedback", json={"user_id": user, "event_id": bad.event_id, "useful": False})
    assert r.json()["weight"] == pytest.approx(0.5)
    good = next(h for h in hits if "动画" in h.summary)
    httpx.post(f"{pstack.api_url}/v1/feedback", json={"user_id": user, "event_id": good.event_id, "useful": True,
                                                     "query": "怎么学物理"}).raise_for_status()
    rel = profile(pstack, user)[0]["rel_id"]
    httpx.post(f"{pstack.api_url}/v1/feedback", json={"user_id": user, "rel_id": rel, "useful": False})
    assert profile(pstack, user)[0]["confidence"] == pytest.approx(CONFIDENCE["likes"] / 2, abs=0.01)
    after = httpx.get(f"{pstack.api_url}/v1/metrics/product").json()
    assert after["feedback"] == before["feedback"] + 3
    not_useful = (before["memory_interference_rate"] or 0) * before["feedback"] + 2
    assert after["memory_interference_rate"] == pytest.approx(not_useful / after["feedback"], abs=1e-3)
    r = httpx.post(f"{pstack.api_url}/v1/feedback", json={"user_id": user, "useful": True})
    assert r.status_code == 422 and "exactly one" in r.json()["message"]


def test_product_metrics_are_computed_from_stored_data(pstack, api, uid):
    before = httpx.get(f"{pstack.api_url}/v1/metrics/product").json()
    user = f"m{uid}"
    consent(pstack, user)
    say(api, user, [("user", "你好"), ("user", "点了提交没反应")], session=f"{user}-a")
    say(api, user, [("user", "今天好多了")], session=f"{user}-b", start=5)
    after = httpx.get(f"{pstack.api_url}/v1/metrics/product").json()
    assert after["messages"] - before["messages"] == 3 and after["sessions"] - before["sessions"] == 2
    assert after["users"] - before["users"] == 1
    for name in ("session_depth", "cross_session_retention", "task_success_rate"):
        assert 0 <= after[name] and (name == "session_depth" or after[name] <= 1)
    failed_before = round((1 - before["task_success_rate"]) * before["sessions"])
    assert round((1 - after["task_success_rate"]) * after["sessions"]) == failed_before + 1


def test_every_beat_entry_names_its_queue_and_an_expiry_and_routes_to_maintenance():
    schedule = beat_schedule.schedule(Settings(redis_url="redis://unused"))
    assert {e["task"] for e in schedule.values()} >= {"memory.decay", "memory.archive", "memory.downweight_noise",
                                                      "memory.compact", "memory.erasure_sweep", "memory.redrive"}
    for entry in schedule.values():
        assert entry["options"]["queue"] == "maintenance" == ROUTES[entry["task"]] and entry["options"]["expires"] > 0


def test_every_file_the_stack_keeps_is_the_owners_only(pstack, prt, api, uid):
    user = f"modes{uid}"
    consent(pstack, user)
    say(api, user, [("user", "我的生日是五月三号"), ("user", "My bank is Monzo")])
    say(api, user, [("user", "哈哈")], session=f"{user}-old", ts=time.time() - 40 * 86400, start=10)  # to archive
    create_celery(pstack.settings).send_task("memory.archive", kwargs={})
    wait_until(lambda: prt.maintenance.archive.list(user_prefix("default", user)), 30, "the small talk archived")
    drain(prt)  # the task ended: none of its files comes or goes during the scan
    opened = [f"{p.relative_to(pstack.data_dir)} {oct(p.stat().st_mode & 0o777)}"
              for p in [pstack.data_dir, *pstack.data_dir.rglob("*")]
              if not p.is_symlink() and p.stat().st_mode & 0o077]
    assert opened == []  # stores, WAL and SHM files, the AOF, archive, audit log, logs, metrics: 0600 in 0700


def test_no_belief_is_set_for_a_user_without_consent_or_for_a_child(pstack, uid):
    def put(user, obj):
        return httpx.put(f"{pstack.api_url}/v1/users/{user}/beliefs",
                         json={"relation": "likes", "object": obj, "operator_id": "teacher"})

    stranger, kid = f"noconsent{uid}", f"kid{uid}b"
    r = put(stranger, "围棋")
    assert r.status_code == 409 and "consent" in r.json()["message"] and "围棋" not in r.text
    assert profile(pstack, stranger) == []
    consent(pstack, kid)
    child = {"child": True, "operator_id": "parent"}
    httpx.put(f"{pstack.api_url}/v1/users/{kid}/child", json=child).raise_for_status()
    r = put(kid, "dinosaurs")
    assert r.status_code == 409 and "child" in r.json()["message"] and "dinosaurs" not in r.text
    assert profile(pstack, kid) == []
