"""A job's life in Redis, on a real Valkey: what a client polling ``GET /v1/jobs/{id}`` sees while the job runs
and once it is finished, when only a short status line in a shared bucket is left of it."""

from __future__ import annotations

import time
import uuid

import pytest

from memory.errors import NotFound
from memory.state import keys
from memory.state.client import connect
from memory.state.dispatch import Dispatch
from memory.state.jobs import Declaration, Jobs, JobWork

TTL_S = 3600
WHO = ("acme", "user-1", "session:7", "m.1@x")


@pytest.fixture
def redis(valkey_url):
    return connect(valkey_url)


@pytest.fixture
def jobs(redis) -> Jobs:
    return Jobs(redis, Dispatch(redis), done_ttl_s=TTL_S)


@pytest.fixture
def job_id() -> str:
    return str(uuid.uuid4())


def _run(jobs: Jobs, job_id: str, event_ids: list[str]) -> None:
    jobs.accept(job_id, WHO, '{"content": "我喜欢物理 and chess"}', job_ttl_s=7 * 86400)
    jobs.extracted_each([Declaration(job_id, ["embed", "graph"], event_ids, JobWork(mode="full", events=[]))])
    jobs.complete_each("embed", {job_id: {"embed_batch": 12, "merged": 1}})


def test_a_finished_job_reads_as_it_did_before_it_finished(jobs, job_id):
    _run(jobs, job_id, ["ev_" + "a" * 24, "ev_" + "b" * 24])
    running = jobs.get(job_id)
    assert running.state == "extracted" and jobs.input(job_id) is not None
    jobs.complete(job_id, "graph")
    done = jobs.get(job_id)
    assert jobs.input(job_id) is None  # its message is no longer held
    assert (done.tenant, done.user_id, done.session_id, done.message_id) == WHO
    assert done.state == "done" and done.event_ids == running.event_ids and done.embed_batch == 12
    assert done.merged == 1 and done.accepted_at == running.accepted_at
    assert set(done.stages) == {"extract", "embed", "graph"}
    assert all(abs(done.stages[s] - running.stages[s]) < 0.002 for s in ("extract", "embed"))
    assert done.accepted_at <= done.stages["extract"] <= done.finished_at
    assert jobs.states([job_id, "no-such-job"]) == {job_id: "done", "no-such-job": None}
    assert jobs.owner(job_id) == WHO[:2]
    jobs.complete(job_id, "graph")  # a redelivered task after the end changes nothing
    assert jobs.get(job_id) == done


def test_a_done_job_whose_message_is_taken_back_says_so(jobs, job_id):
    _run(jobs, job_id, [])
    jobs.complete(job_id, "graph")
    jobs.finish(job_id, "retracted", "its message was taken back | by an undo")
    job = jobs.get(job_id)
    assert job.state == "retracted" and job.note == "its message was taken back / by an undo"
    assert job.event_ids == [] and job.embed_batch == 12


def test_a_finished_status_outlives_the_done_ttl_by_at_most_a_quarter(jobs, job_id, redis):
    _run(jobs, job_id, ["ev_" + "c" * 24])
    jobs.complete(job_id, "graph")
    assert not redis.exists(keys.job(job_id))
    [bucket] = [b for b in jobs.done_buckets(job_id) if redis.hexists(b, job_id)]
    assert TTL_S - 5 <= redis.ttl(bucket) <= TTL_S * 1.25 + 1
    assert redis.object("encoding", bucket) == "listpack"  # the compact encoding: ~170 bytes a job
    # a poll later in the TTL still finds it: the buckets looked in reach back over the whole TTL
    assert bucket in jobs.done_buckets(job_id, now=time.time() + TTL_S - 1)


def test_erasing_a_job_leaves_neither_its_record_nor_its_status(jobs, job_id):
    other = str(uuid.uuid4())
    for j in (job_id, other):
        _run(jobs, j, [])
        jobs.complete(j, "graph")
    pending = str(uuid.uuid4())
    jobs.accept(pending, WHO, "{}", job_ttl_s=60)
    jobs.erase([job_id, pending])
    for j in (job_id, pending):
        with pytest.raises(NotFound):
            jobs.get(j)
    assert jobs.get(other).state == "done" and pending not in jobs.stale(older_than_s=-60, limit=10)
