"""Tenant-fair work (``memory.state.fairness``): a tenant's flood waits in its own line, so another tenant's
messages are not held up behind it — on a real Valkey for the lines themselves, and through the real API and
workers for a flood of 5,000 and for the 429 a full line answers."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from memory.mneme import Mneme
from memory.state import keys
from memory.state.client import connect
from memory.state.dispatch import Dispatch
from memory.state.fairness import STUCK_S, FairShare
from memory.state.jobs import Jobs
from tasks.maintenance import lost_jobs
from tests.polling import wait_until
from tests.stacks import master_key, restarted, running_stack
from workers.celery_app import create_celery

WINDOW = 4


@pytest.fixture
def redis(valkey_url):
    return connect(valkey_url)


@pytest.fixture
def jobs(redis) -> Jobs:
    return Jobs(redis, Dispatch(redis), done_ttl_s=3600)


@pytest.fixture
def fair(redis, jobs) -> FairShare:
    return FairShare(redis, WINDOW, jobs.unfinished)


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _accepted(jobs: Jobs, tenant: str, n: int) -> list[str]:
    """n jobs accepted for the tenant (pending, as the accept step leaves them)."""
    out = []
    for i in range(n):
        job_id = f"{i % 256:02x}{uuid.uuid4().hex[2:]}"
        jobs.accept(job_id, (tenant, "u1", "s1", f"m{i}"), '{"content": "我喜欢物理 and chess"}', job_ttl_s=3600)
        out.append(job_id)
    return out


def test_past_its_window_a_tenant_waits_in_the_order_it_came_and_is_let_in_as_its_jobs_end(fair, jobs):
    tenant = _tenant()
    ids = _accepted(jobs, tenant, 10)
    place = fair.admit({tenant: [(job_id, f"req-{job_id[:6]}") for job_id in ids]})[tenant]
    assert [job_id for job_id, _ in place.let_in] == ids[:WINDOW] and place.waiting == 6
    assert fair.queued(tenant) == (WINDOW, 6)
    assert fair.waiting([(tenant, job_id) for job_id in ids]) == set(ids[WINDOW:])
    for job_id in ids[:2]:
        jobs.finish(job_id, "done", "test")
    let_in = fair.ended([(tenant, job_id) for job_id in ids[:2]])
    assert let_in == [(job_id, f"req-{job_id[:6]}") for job_id in ids[WINDOW:WINDOW + 2]]  # in order, request ids kept
    assert fair.ended([(tenant, ids[0])]) == []  # an end seen twice frees no second place
    again = fair.admit({tenant: [(ids[-1], None)]})[tenant]  # a job already in line keeps its place
    assert again.let_in == [] and again.waiting == 4


def test_a_tenant_whose_window_is_full_does_not_hold_up_another(fair, jobs):
    flood, few = _tenant(), _tenant()
    fair.admit({flood: [(job_id, None) for job_id in _accepted(jobs, flood, 50)]})
    late = _accepted(jobs, few, 3)
    places = fair.admit({few: [(job_id, None) for job_id in late], flood: []})
    assert [job_id for job_id, _ in places[few].let_in] == late and places[few].waiting == 0
    assert places[flood].let_in == [] and places[flood].waiting == 50 - WINDOW


def test_a_place_held_by_a_job_that_ended_unseen_is_freed_once_it_looks_stuck(fair, jobs, redis):
    tenant = _tenant()
    ids = _accepted(jobs, tenant, WINDOW + 2)
    fair.admit({tenant: [(job_id, None) for job_id in ids]})
    jobs.finish(ids[0], "retracted", "taken back")  # ended where no one told the line
    assert fair.admit({tenant: []})[tenant].let_in == []  # not yet: it was let in a moment ago
    flight = keys.fair(tenant)[0]
    redis.zadd(flight, {ids[0]: time.time() - STUCK_S - 1, ids[1]: time.time() - STUCK_S - 1})  # both long in
    place = fair.admit({tenant: []})[tenant]
    assert [job_id for job_id, _ in place.let_in] == [ids[WINDOW]]  # ids[1] is still pending: it keeps its place
    assert fair.queued(tenant) == (WINDOW, 1)


def test_a_slow_pipeline_is_looked_at_once_in_a_while_not_at_every_step(redis, jobs):
    """Jobs all still at work past ``STUCK_S`` (workers stopped, a long backlog) look stuck at every step, and a
    look asks after every job in flight: looking at every step made each of the API's sends ~5-8 ms. A process
    looks at most every ``look_every_s``, and a job that ended unseen is still freed at its next look."""
    asked: list[int] = []

    def unfinished(job_ids):
        asked.append(len(job_ids))
        return jobs.unfinished(job_ids)

    fair, tenant = FairShare(redis, WINDOW, unfinished, look_every_s=0.5), _tenant()
    ids = _accepted(jobs, tenant, WINDOW + 2)
    fair.admit({tenant: [(job_id, None) for job_id in ids]})
    redis.zadd(keys.fair(tenant)[0], {job_id: time.time() - STUCK_S - 1 for job_id in ids[:WINDOW]})
    for _ in range(20):
        assert fair.admit({tenant: []})[tenant].let_in == []
    assert asked == [WINDOW]  # one look, every job in flight still pending
    jobs.finish(ids[0], "retracted", "taken back")  # ended where no one told the line
    wait_until(lambda: fair.admit({tenant: []})[tenant].let_in == [(ids[WINDOW], None)], 10,
               "the next look frees the place of the job that ended")
    assert asked == [WINDOW, WINDOW]


def test_an_erased_users_jobs_leave_the_line_and_the_redrive_lets_the_others_in(fair, jobs, redis):
    tenant = _tenant()
    ids = _accepted(jobs, tenant, WINDOW + 3)
    fair.admit({tenant: [(job_id, None) for job_id in ids]})
    assert tenant in redis.smembers(keys.FAIR_TENANTS)
    fair.forget(tenant, ids[:2] + ids[-1:])  # two in flight, one waiting
    assert fair.queued(tenant) == (WINDOW - 2, 2)
    assert [job_id for job_id, _ in fair.sweep()] == ids[WINDOW:WINDOW + 2]
    assert fair.queued(tenant) == (WINDOW, 0)
    assert tenant not in redis.smembers(keys.FAIR_TENANTS)  # nothing of it waits: the redrive forgets it


def test_with_no_window_every_job_is_let_in(redis, jobs):
    tenant = _tenant()
    ids = _accepted(jobs, tenant, 3)
    place = FairShare(redis, 0, jobs.unfinished).admit({tenant: [(job_id, None) for job_id in ids]})[tenant]
    assert [job_id for job_id, _ in place.let_in] == ids and place.waiting == 0


# --- through the real API and workers -----------------------------------------------------------------------
FLOOD, FEW = 5000, 50


@pytest.fixture(scope="module")
def fairstack(tmp_path_factory):
    with running_stack(tmp_path_factory, "fair", MNEME_AUTH_REQUIRED="true", MNEME_MASTER_KEY=master_key(),
                       MNEME_CONSENT_REQUIRED="false") as s:
        yield s


def _key(stack, tenant: str) -> dict[str, str]:
    _, secret = Mneme(stack.settings).state.api_keys.create_key(tenant, name=f"{tenant} agent", rate_limit=0)
    return {"Authorization": f"Bearer {secret}"}


def _bodies(prefix: str, n: int) -> list[dict]:
    """n messages of one user in a few sessions, Chinese and English mixed as users write."""
    texts = ["我喜欢物理，尤其是电磁学", "I keep mixing up velocity and acceleration", "明天要考化学 so I'm nervous",
             "My sister studies at 北京大学", "请用简短的例子解释牛顿第二定律"]
    start = time.time() - n
    return [{"user_id": f"{prefix}-user", "session_id": f"{prefix}-s{i % 20}", "message_id": f"{prefix}-m{i}",
             "role": "user", "content": f"{texts[i % len(texts)]} ({prefix} {i})", "client_ts": start + i}
            for i in range(n)]


async def _post_all(url: str, headers: dict[str, str], bodies: list[dict], connections: int = 8) -> list[str]:
    """POST every body (a 429 is retried after its Retry-After); the job ids."""
    job_ids = [""] * len(bodies)
    todo = iter(range(len(bodies)))

    async def one(http: httpx.AsyncClient) -> None:
        for i in todo:
            while (r := await http.post("/v1/messages", json=bodies[i])).status_code == 429:
                await asyncio.sleep(float(r.headers["Retry-After"]))
            assert r.status_code == 202, r.text
            job_ids[i] = r.json()["job_id"]

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        await asyncio.gather(*(one(http) for _ in range(connections)))
    return job_ids


def _unfinished(rt: Mneme, job_ids: list[str]) -> int:
    return len(rt.state.jobs.unfinished(job_ids))


def test_a_tenant_posting_after_another_tenants_flood_of_5000_is_served_within_seconds(fairstack):
    """Bound: the 50 messages of the late tenant are searchable within 60 s of the pipeline starting on them
    (measured here: a few seconds), while the flood still has thousands waiting; the flood completes too.
    The pipeline worker is stopped while both post, so the queues hold exactly what the lines let in."""
    rt = Mneme(fairstack.settings)
    flood_key, few_key = _key(fairstack, "flooder"), _key(fairstack, "latecomer")
    fairstack.stop_one("worker-pipeline")
    try:
        flood_ids = asyncio.run(_post_all(fairstack.api_url, flood_key, _bodies("a", FLOOD)))
        few_ids = asyncio.run(_post_all(fairstack.api_url, few_key, _bodies("b", FEW), connections=4))
        window = rt.settings.tenant_window
        wait_until(lambda: rt.state.fair.queued("latecomer") == (FEW, 0), 10, "the late tenant's jobs let in")
        assert rt.state.fair.queued("flooder") == (window, FLOOD - window)
        # the redrive does not take a job waiting its turn for a lost one
        impatient = Mneme(fairstack.settings.model_copy(update={"redrive_after_s": 1}))
        celery = create_celery(impatient.settings)
        report = wait_until(lambda: (r := lost_jobs(impatient, celery, 10_000))["waiting"] == FLOOD - window and r,
                            30, "every waiting job of the flood stale")
        assert report["job_ids"] == []
    finally:
        fairstack.start_one("worker-pipeline")
    fairstack.wait_ready(wait_embedder=False)
    started = time.monotonic()
    wait_until(lambda: _unfinished(rt, few_ids) == 0, 120, "the late tenant's 50 messages done")
    few_s = time.monotonic() - started
    flood_left = _unfinished(rt, flood_ids)
    assert few_s < 60 and flood_left > FLOOD // 2, (few_s, flood_left)  # first in, first out: 0 left by then
    with httpx.Client(base_url=fairstack.api_url, headers=few_key) as http:
        found = http.post("/v1/recall", json={"user_id": "b-user", "query": "北京大学 sister", "k": 3}).json()
        assert any("北京大学" in e["summary"] or "sister" in e["summary"] for e in found["events"]), found
    wait_until(lambda: _unfinished(rt, flood_ids) == 0, 240, "the flood done too", interval=0.5)
    # a batch's places in the line are freed just after its jobs are marked done (tasks.pipeline._settle)
    wait_until(lambda: rt.state.fair.queued("flooder") == (0, 0), 30, "the flood's line empty")


def test_a_tenant_whose_line_is_full_is_answered_429_and_loses_nothing(fairstack):
    rt = Mneme(fairstack.settings)
    key = _key(fairstack, "bulk")
    bodies = _bodies("c", 200)
    fairstack.stop_one("worker-pipeline")
    try:
        with restarted(fairstack, "api", MNEME_TENANT_WINDOW="20", MNEME_TENANT_QUEUE_LIMIT="100"):
            with httpx.Client(base_url=fairstack.api_url, headers=key) as http:
                answers = [http.post("/v1/messages", json=body) for body in bodies]
                refused = [i for i, r in enumerate(answers) if r.status_code == 429]
                assert refused and {answers[i].status_code for i in range(refused[0])} == {202}
                assert 120 <= refused[0] <= 160, refused[0]  # 20 in flight + 100 waiting (+ what one send held)
                first = answers[refused[0]]
                assert int(first.headers["Retry-After"]) >= 1 and "waiting" in first.json()["message"]
                kept = http.get("/v1/sessions/c-s0/messages").json()["messages"]
                accepted = {b["message_id"] for b, r in zip(bodies, answers, strict=True) if r.status_code == 202}
                assert {m["message_id"] for m in kept} <= accepted  # nothing of a refused message was kept
    finally:
        fairstack.start_one("worker-pipeline")
    job_ids = asyncio.run(_post_all(fairstack.api_url, key, bodies, connections=2))  # the refused, again
    wait_until(lambda: _unfinished(rt, job_ids) == 0, 120, "every message done")
    wait_until(lambda: rt.state.fair.queued("bulk") == (0, 0), 30, "the tenant's line empty")
