"""The write path end to end on real Celery worker processes: extraction, embedding, graph merge,
recall; redelivered tasks and lost enqueues change nothing and lose nothing."""

import json
import time
import uuid

import httpx
import pytest
from mneme_client import MnemeClient

from bench.load import embedded_texts
from memory import ids
from memory.claims.rule import CONFIDENCE
from memory.mneme import WARM_UP_TEXTS
from memory.models import Role
from memory.state import keys
from memory.state.broker import job_ids_of
from tests.accepted import reopen_job, write_job
from tests.polling import wait_until
from tests.stacks import drain, restarted
from workers.celery_app import create_celery
from workers.local import demo


@pytest.fixture(scope="module")
def celery(stack):
    app = create_celery(stack.settings)
    yield app
    app.close()


def extraction_tasks(runtime) -> list[dict]:
    """The kwargs of each ``memory.extract`` task waiting in its queue, oldest first."""
    raw = [json.loads(m) for m in reversed(runtime.state.client.lrange("extract", 0, -1))]
    return [json.loads(m["body"])[1] for m in raw if m["headers"]["task"] == "memory.extract"]


def test_an_api_process_sends_the_extractions_of_what_it_accepted_together_as_one_task(uid, runtime, stack):
    """The messages an API process accepts within MNEME_EXTRACT_SEND_INTERVAL_S go to extraction as one task
    naming their jobs, each beside the id of its HTTP request, a full batch (MNEME_EXTRACT_BATCH_SIZE) at once;
    what it holds when it stops is sent then. Every message is extracted and done."""
    drain(runtime)
    stack.stop_one("worker-pipeline")  # the tasks wait in their queue, to be read
    try:
        with restarted(stack, "api", MNEME_EXTRACT_SEND_INTERVAL_S="600", MNEME_EXTRACT_BATCH_SIZE="3"):
            jobs = []
            for i in range(7):
                text = f"我喜欢{LIKES[i]}" if i % 2 else f"I love {LIKES[i]}"
                r = httpx.post(stack.api_url + "/v1/messages", headers={"x-request-id": f"rq-{uid}-{i}"},
                               json={"user_id": f"u{uid}", "session_id": f"s{uid}", "message_id": f"m{i}",
                                     "role": "user", "content": text, "client_ts": time.time()}, timeout=30)
                assert r.status_code == 202, r.text
                jobs.append(r.json()["job_id"])
            sent = extraction_tasks(runtime)  # two full batches went at once; the seventh waits its interval
            assert [t["job_ids"] for t in sent] == [jobs[:3], jobs[3:6]]
            assert [t["request_ids"] for t in sent] == [[f"rq-{uid}-{i}" for i in r] for r in (range(3), range(3, 6))]
        assert extraction_tasks(runtime)[-1] == {"job_ids": jobs[6:], "request_ids": [f"rq-{uid}-6"]}  # on stop
    finally:
        stack.start_one("worker-pipeline")
    stack.wait_ready(wait_embedder=False)
    with MnemeClient(stack.api_url) as client:
        assert [j.state for j in client.wait(jobs, timeout=60)] == ["done"] * 7


def test_scripted_cross_session_flow(client, uid, monkeypatch):
    monkeypatch.setattr(demo, "USER", f"student_{uid}")
    assert demo.play(client)


def test_job_reports_its_stages_and_events(client, uid):
    accepted = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                               content="I'm 16 years old and I love chemistry")
    [job] = client.wait([accepted.job_id])
    assert job.state == "done" and set(job.stages) == {"extract", "embed", "graph"}
    assert len(job.event_ids) == 2 and job.message_id == "m1"
    result = client.recall(user_id=f"u{uid}", query="chemistry", k=3)
    assert {(f.relation, f.object) for f in result.facts} >= {("age", "16"), ("likes", "chemistry")}
    assert result.events[0].message_ids == ["m1"] and result.events[0].why


def test_assistant_messages_are_searchable_too(client, uid):
    a = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="a1", role="assistant",
                        content="第一步：设变量 velocity_final = v0 + a*t，然后代入数值。")
    client.wait([a.job_id])
    hits = client.recall(user_id=f"u{uid}", query="你上次说的那个变量名叫什么 velocity_final", k=3).events
    assert hits[0].message_ids == ["a1"] and hits[0].event_type == "plan"


def test_event_type_filter(client, uid):
    jobs = [client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role="user",
                            content=text).job_id
            for i, text in enumerate(["我不懂楞次定律", "楞次定律的题好难，我想学会它", "你好"])]
    client.wait(jobs)
    hits = client.recall(user_id=f"u{uid}", query="楞次定律", event_types=["concept_confusion"]).events
    assert [h.message_ids for h in hits] == [["m0"]]


def test_redelivered_tasks_have_no_second_effect(client, uid, runtime, celery):
    user = f"u{uid}"
    accepted = client.remember(user_id=user, session_id=f"s{uid}", message_id="m1", role="user",
                               content="我今年17岁，我喜欢物理")
    [job] = client.wait([accepted.job_id])
    before_facts = runtime.semantic.profile("default", user)
    before_events = runtime.episodic.store.get("default", user, job.event_ids)
    reopen_job(runtime, accepted.job_id)  # as a kill -9 before the acks leaves it: every stage comes back
    for _ in range(2):  # the broker redelivers every stage, twice
        for task in ("memory.extract", "memory.embed", "memory.upsert_graph"):
            celery.send_task(task, kwargs={"job_id": accepted.job_id})
    drain(runtime)
    assert [j.state for j in client.wait([accepted.job_id])] == ["done"]
    after_facts = runtime.semantic.profile("default", user)
    assert [(f.rel_id, f.stored_confidence, f.why) for f in after_facts] == \
           [(f.rel_id, f.stored_confidence, f.why) for f in before_facts]
    assert runtime.episodic.store.get("default", user, job.event_ids) == before_events
    assert client.job(accepted.job_id).state == "done"


def test_a_finished_job_keeps_its_status_for_the_done_ttl_but_no_copy_of_the_text(client, uid, runtime):
    accepted = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                               content=f"我的密码提示是小猫{uid}")
    [job] = client.wait([accepted.job_id])
    assert job.state == "done" and job.session_id == f"s{uid}" and job.message_id == "m1" and job.event_ids
    assert {"extract", "embed"} <= set(job.stages) and job.finished_at >= job.accepted_at
    redis = runtime.state.client
    assert not redis.exists(keys.job(accepted.job_id))  # its record, which held the message, is gone
    [bucket] = [b for b in runtime.state.jobs.done_buckets(accepted.job_id) if redis.hexists(b, accepted.job_id)]
    assert f"小猫{uid}" not in redis.hget(bucket, accepted.job_id)
    ttl = runtime.settings.job_done_ttl_s
    assert ttl - 60 < redis.ttl(bucket) <= ttl * 1.25 + 1  # readable for 1 to 1.25 times the done TTL


def test_duplicate_post_is_not_processed_twice(client, uid, runtime):
    first = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                            content="I don't understand torque")
    client.wait([first.job_id])
    again = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                            content="I don't understand torque")
    assert again.duplicate and again.job_id == first.job_id
    [fact] = runtime.semantic.profile("default", f"u{uid}")
    assert len(fact.event_ids) == 1 and fact.stored_confidence == pytest.approx(CONFIDENCE["obstacle"])


def test_an_accepted_message_whose_enqueue_was_lost_is_redriven(uid, runtime, celery, client):
    """Accept a message straight into Redis without queueing it (as if the broker dropped it);
    the beat-run redrive task finds it and the pipeline completes it."""
    job_id = ids.job_id("default", f"s{uid}", "lost")
    runtime.state.working.append(tenant="default", user_id=f"u{uid}", session_id=f"s{uid}", message_id="lost",
                                 role=Role.user, content="我叫小红", client_ts=time.time(), job_id=job_id)
    assert client.job(job_id).state == "accepted"
    an_hour_ago = time.time() - 3600  # when it was accepted, as the redrive will see it
    runtime.state.client.zadd(keys.pending(ids.job_shard(job_id)), {job_id: an_hour_ago})
    celery.send_task("memory.redrive", kwargs={"limit": 1000})
    [job] = client.wait([job_id], timeout=60)
    assert job.state == "done"
    assert ("name", "小红") in {(f.relation, f.object) for f in client.recall(user_id=f"u{uid}", query="名字").facts}


def test_the_extraction_is_queued_with_its_message_and_the_request_id_but_shows_no_text(uid, stack, client):
    """The API queues the extraction inside the step that accepts the message (tasks.envelope): the worker
    runs it, its log lines carry the HTTP request's id, and the task's description shows no message text."""
    import httpx

    secret = f"我的秘密是蓝色气球{uid}"
    response = httpx.post(f"{stack.api_url}/v1/messages", headers={"X-Request-ID": f"req-{uid}"}, json={
        "user_id": f"u{uid}", "session_id": f"s{uid}", "message_id": "m1", "role": "user", "content": secret,
        "client_ts": time.time()})
    assert response.status_code == 202, response.text
    [job] = client.wait([response.json()["job_id"]])
    assert job.state == "done" and job.event_ids
    lines = [json.loads(line) for line in (stack.logs / "worker-pipeline.log").read_text("utf-8").splitlines()
             if line.startswith("{") and f"req-{uid}" in line]
    assert any(line["task_name"] == "memory.extract" for line in lines)
    assert not any(secret in line.get("message", "") for line in lines)


def test_a_poison_message_fails_its_job_with_the_error_naming_fields_not_values(uid, runtime, celery, client):
    job_id = str(uuid.uuid4())
    write_job(runtime, job_id, payload=json.dumps({"role": "robot", "content": f"我的秘密 secret {uid}"}))
    celery.send_task("memory.extract", kwargs={"job_id": job_id})
    [job] = client.wait([job_id], timeout=30)
    assert job.state == "failed" and "extract" in job.error and "validation" in job.error.lower()
    assert "role" in job.error and "robot" not in job.error and uid not in job.error


def test_embeddings_are_batched_across_messages(client, uid, stack):
    """While the embed worker is busy, messages queue up and share one model call."""
    from concurrent.futures import ThreadPoolExecutor

    def send(i):
        with MnemeClient(stack.api_url) as c:
            return c.remember(user_id=f"u{uid}", session_id=f"s{uid}-{i}", message_id="m", role="user",
                              content=f"第{i}条消息：我想学会微积分和线性代数 number {i}").job_id

    with ThreadPoolExecutor(8) as pool:
        jobs = list(pool.map(send, range(60)))
    done = client.wait(jobs, timeout=120)
    assert all(j.state == "done" for j in done)
    assert max(j.embed_batch for j in done) > 1


CONVERSATION = ["我叫林小雨，最近在准备物理竞赛", "Great, let's plan your physics contest prep week by week.",
                "光的折射我总是搞不懂", "折射是光从一种介质斜射入另一种介质时传播方向改变的现象。",
                "I prefer short answers, 谢谢", "Understood: I'll keep my answers brief from now on.",
                "下周三我要考化学", "Good luck on Wednesday! Review the periodic table tonight."]


def test_with_two_embed_workers_the_model_embeds_each_turn_of_a_conversation_once(client, uid, runtime, stack):
    """A message's vector adds a share of the turn it answers. With two embed workers the turn before was
    often embedded by the other one, which kept its vector in working memory: the model embeds each message
    once however the turns fall to the workers (before, a turn the other worker embedded was embedded again:
    42 model texts for these 24 messages), and a reply's vector is the one a single worker gives it."""
    from memory.embedding import USEEmbedder, embed_in_context

    drain(runtime)
    before = embedded_texts(stack.api_url)
    stack.start_another("worker-embed", "worker-embed-2", "embed-2")  # no warm-up texts: its model loads with a batch
    said: dict[str, list[str]] = {f"s{uid}-{k}": [] for k in range(3)}
    jobs: list[str] = []
    try:
        stack.wait_ready(wait_embedder=False)
        for turn, line in enumerate(CONVERSATION):  # a turn of every session, the next once those are done
            sent = []
            for k, session in enumerate(said):
                said[session].append(f"{line} #{uid}{k}")  # a text of its own: none is among a worker's recent
                sent.append(client.remember(user_id=f"u{uid}-{k}", session_id=session, message_id=f"m{turn}",
                                            role="user" if turn % 2 == 0 else "assistant",
                                            content=said[session][-1], client_ts=1_700_000_000 + turn).job_id)
            assert {j.state for j in client.wait(sent, timeout=60)} == {"done"}
            jobs += sent
        logs = {name: (stack.logs / f"{name}.log").read_text() for name in ("worker-embed", "worker-embed-2")}
    finally:
        stack.stop_one("worker-embed-2")
    after = embedded_texts(stack.api_url)
    took = {name: sum(f"job {job}" in log for job in jobs) for name, log in logs.items()}
    assert min(took.values()) > 0, f"both workers embedded turns of the conversation: {took}"
    assert after["model"] - before.get("model", 0) == len(said) * len(CONVERSATION)  # no turn a second time
    assert after["shared"] - before.get("shared", 0) > 0
    session = next(iter(said))
    reply = embed_in_context(USEEmbedder(), said[session][5:6], said[session][4:5],
                             runtime.settings.context_vector_weight)[0]
    store = runtime.episodic.store
    [(event_id, similarity)] = store.vector_search("default", f"u{uid}-0", reply, None, 1)
    assert similarity > 0.9999 and store.get("default", f"u{uid}-0", [event_id])[0].message_ids == ["m5"]


def test_a_backlog_is_embedded_in_runs_of_batches_each_turn_once_with_its_context(client, uid, runtime, stack):
    """In a backlog the embed worker takes four model batches a run and pipelines them: it reads the next
    batch's inputs and stores the batch before while the model embeds one. A conversation's turns fall in
    consecutive batches of a run (a batch of two here), each answering a turn of the batch before, which is
    not stored yet when the next batch's inputs are read: every message is done, the model embeds each turn
    once, and a reply's vector is the one a lone embedding gives it (its own plus a share of the turn it
    answers)."""
    from memory.embedding import USEEmbedder, embed_in_context

    drain(runtime)
    before = embedded_texts(stack.api_url)
    said: dict[str, list[str]] = {f"s{uid}-{k}": [] for k in range(2)}
    stack.stop_one("worker-embed")  # the embeddings wait in their queue, the backlog
    try:
        jobs = []
        for turn, line in enumerate(CONVERSATION):
            for k, session in enumerate(said):
                said[session].append(f"{line} #{uid}{k}")
                jobs.append(client.remember(user_id=f"u{uid}-{k}", session_id=session, message_id=f"m{turn}",
                                            role="user" if turn % 2 == 0 else "assistant",
                                            content=said[session][-1], client_ts=1_700_000_000 + turn).job_id)
        wait_until(lambda: {j for m in runtime.state.client.lrange("embed", 0, -1) for j in job_ids_of(m)} >= set(jobs),
                   30, "every message extracted, its embedding queued")
    except BaseException:
        stack.start_one("worker-embed")
        raise
    with restarted(stack, "worker-embed", MNEME_EMBED_BATCH_SIZE="2", MNEME_EMBED_FLUSH_INTERVAL_S="1"):
        done = client.wait(jobs, timeout=60)
        model = embedded_texts(stack.api_url)["model"] - before.get("model", 0) - len(WARM_UP_TEXTS)  # its start's
    assert {j.state for j in done} == {"done"} and max(j.embed_batch for j in done) == 2
    assert model == len(jobs)  # no turn a second time
    embedder, weight = USEEmbedder(), runtime.settings.context_vector_weight
    for i, job in enumerate(done[2:], start=2):  # a turn after the first: a reply, with a context
        (turn, k), session = divmod(i, 2), f"s{uid}-{i % 2}"
        reply = embed_in_context(embedder, said[session][turn:turn + 1], said[session][turn - 1:turn], weight)[0]
        [(event_id, similarity)] = runtime.episodic.store.vector_search("default", f"u{uid}-{k}", reply, None, 1)
        assert similarity > 0.9999 and event_id in job.event_ids, (turn, k)


def test_steady_traffic_is_not_held_for_a_run_of_batches(client, uid, runtime, stack):
    """A run of the embed stage takes four batches when a backlog has them queued, but a batch that steady
    traffic filled runs a moment after (``RUN_WAIT_S``), not when the flush interval ends (ten minutes here):
    messages are not kept waiting for others that are not there."""
    drain(runtime)
    with restarted(stack, "worker-embed", MNEME_EMBED_BATCH_SIZE="2", MNEME_EMBED_FLUSH_INTERVAL_S="600"):
        jobs = [client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role="user",
                                content=f"我喜欢{LIKES[i]}").job_id for i in range(2)]
        done = client.wait(jobs, timeout=60)
    assert [j.state for j in done] == ["done", "done"]


def test_queued_jobs_survive_a_worker_restart(client, uid, stack):
    stack.stop_one("worker-pipeline")
    accepted = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                               content="我讨厌背公式")
    time.sleep(0.5)
    assert client.job(accepted.job_id).state == "accepted"  # nobody is consuming
    stack.start_one("worker-pipeline")
    stack.wait_ready(wait_embedder=False)
    [job] = client.wait([accepted.job_id], timeout=60)
    assert job.state == "done"
    assert ("dislikes", "背公式") in {(f.relation, f.object) for f in client.recall(user_id=f"u{uid}", query="x").facts}


def test_a_message_on_its_own_is_done_and_recalled_without_waiting_for_a_batch(client, uid, runtime):
    """The batched stages wait for more messages only as long as their flush intervals (extract 0.1 s, embed
    0.2 s, graph 0.1 s), not for a full batch, which light traffic never fills. How long a message alone takes
    is a figure of `make bench` (the e2e section's light traffic, goal <= 1 s), not a bound of this test."""
    drain(runtime)  # nothing queued ahead of it, nothing after it
    accepted = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                               content="我喜欢天文学")
    [job] = client.wait([accepted.job_id], timeout=60)
    assert job.state == "done" and set(job.stages) == {"extract", "embed", "graph"}
    assert client.recall(user_id=f"u{uid}", query="天文学").events[0].message_ids == ["m1"]


LIKES = ["天文学", "astronomy", "化学", "chemistry", "历史", "history", "音乐", "music"]


def test_a_poison_request_in_a_batch_fails_alone_and_the_others_of_every_user_are_done(client, uid, runtime,
                                                                                        celery, stack):
    """Eight messages of four users (in the extraction tasks the API sent for them), a job whose message is
    malformed and a request naming no job make one batch (exactly its size in jobs, and a flush interval
    longer than the test): the two poison requests are dead letters, each on its own, the poison job fails,
    and the eight are extracted in the batch's one declaring step and done, each user's beliefs their own."""
    users = [f"u{uid}-{i}" for i in range(4)]
    poison_job = str(uuid.uuid4())
    write_job(runtime, poison_job, user_id=users[0], payload=json.dumps({"role": "robot", "content": f"秘密 {uid}"}))

    def say(i: int) -> str:
        text = f"我喜欢{LIKES[i]}" if i % 2 == 0 else f"I love {LIKES[i]}"
        return client.remember(user_id=users[i % 4], session_id=f"s{uid}-{i % 4}", message_id=f"m{i}", role="user",
                               content=text).job_id

    drain(runtime)
    stack.stop_one("worker-pipeline")  # the batch's tasks wait in the queue, counted
    try:
        good = [say(i) for i in range(4)]
        poison = celery.send_task("memory.extract", kwargs={"job_id": poison_job}).id
        nameless = celery.send_task("memory.extract", kwargs={}).id
        good += [say(i) for i in range(4, 8)]
        def sent() -> list[str]:
            queued = runtime.state.client.lrange("extract", 0, -1)
            return queued if set(good) <= {j for m in queued for j in job_ids_of(m)} else []

        queued = wait_until(sent, 10, "the API sent the extractions")
    except BaseException:
        stack.start_one("worker-pipeline")
        raise
    named = sum(len(job_ids_of(m)) or 1 for m in queued)  # a batch counts jobs (a request naming none counts one)
    with restarted(stack, "worker-pipeline", MNEME_EXTRACT_BATCH_SIZE=str(named),
                   MNEME_EXTRACT_FLUSH_INTERVAL_S="600"):
        done = client.wait([*good, poison_job], timeout=60)
    assert [j.state for j in done] == ["done"] * 8 + ["failed"]
    extracted_at = [j.stages["extract"] for j in done[:8]]
    assert max(extracted_at) - min(extracted_at) < 0.003, extracted_at  # one step declared them all
    assert done[8].error.startswith("extract: InvalidInput") and "role" in done[8].error
    letter = runtime.state.dead_letters.get(poison)
    assert (letter.task, letter.job_id, letter.kwargs, letter.error_type) == (
        "memory.extract", poison_job, {"job_id": poison_job}, "InvalidInput")
    assert (runtime.state.dead_letters.get(nameless).job_id, runtime.state.dead_letters.get(nameless).kwargs) == (
        None, {})
    assert not [d for d in runtime.state.dead_letters.list(limit=1000) if d.job_id in good]
    for i, user in enumerate(users):
        assert {b.object for b in client.profile(user).beliefs} == {LIKES[i], LIKES[i + 4]}
