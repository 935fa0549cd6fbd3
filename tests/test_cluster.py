"""Mneme on a Redis Cluster: a local Valkey Cluster of 3 masters with a replica each holds the state
(``MNEME_REDIS_CLUSTER``), a Valkey of its own the Celery broker (``MNEME_BROKER_REDIS_URL``), and the real API
and Celery workers run on them. Each session's keys, its jobs and its shard's sets share a hash tag, so every
Lua step is one atomic step on one node (``memory.state.keys``): the pipeline, undo and erasure work across
all three masters, a worker killed with -9 loses nothing, and so does a master killed with -9 once its replica
has what it acknowledged (replication is asynchronous: README, "Redis Cluster")."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from mneme_client import MnemeAPIError, MnemeClient
from redis.crc import key_slot

from memory import ids
from memory.mneme import Mneme
from memory.state import keys
from tests.polling import wait_until
from tests.stacks import running_stack
from workers.local.cluster import LocalCluster, LocalNode
from workers.local.stack import Stack

TENANT = "default"
TEXTS = ["我叫小明，今年十六岁，住在杭州", "I like chess and I play every weekend", "我喜欢物理 but chemistry is hard",
         "My favourite food is 饺子", "我的猫叫 Mochi", "I work as a nurse in Shenzhen"]

REDRIVE_AFTER_S = 5  # memory.redrive re-sends jobs accepted this long ago and not done


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), node_timeout_ms=2000) as c:
        yield c


@pytest.fixture(scope="module")
def cstack(tmp_path_factory, cluster) -> Iterator[Stack]:
    broker = Stack(tmp_path_factory.mktemp("cluster-broker"), env={"MNEME_REDIS_URL": ""})
    broker.start_redis()
    try:
        with running_stack(tmp_path_factory, "cluster-stack", MNEME_REDIS_URL=cluster.url, MNEME_REDIS_CLUSTER="true",
                           MNEME_BROKER_REDIS_URL=broker.env["MNEME_REDIS_URL"], MNEME_CONSENT_REQUIRED="false",
                           MNEME_TASK_MAX_RETRIES="12", MNEME_REDRIVE_AFTER_S=str(REDRIVE_AFTER_S)) as stack:
            yield stack
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def rt(cstack) -> Mneme:
    return Mneme(cstack.settings)


@pytest.fixture
def client(cstack) -> Iterator[MnemeClient]:
    with MnemeClient(cstack.api_url) as c:
        yield c


def remember(client: MnemeClient, user: str, session: str, i: int, deadline: float = 60) -> str:
    """POST one message, again on a 503 (a node failing over) until accepted; its job id."""
    until = time.monotonic() + deadline
    while True:
        try:
            return client.remember(user_id=user, session_id=session, message_id=f"m{i}", role="user",
                                   content=TEXTS[i % len(TEXTS)], client_ts=time.time()).job_id
        except MnemeAPIError as exc:
            if exc.status != 503 or time.monotonic() > until:
                raise
            time.sleep(0.2)


def keys_slot(tag: str) -> int:
    return int(key_slot(tag.encode()))


def masters_holding(cluster: LocalCluster, tags: list[str]) -> set[int]:
    return {cluster.master_of(keys_slot(tag)).port for tag in tags}


def caught_up(master: LocalNode) -> None:
    """Wait until the master's replicas have every write it acknowledged so far (their replication offset
    reached its own; WAIT would count only the writes of the connection that asks)."""
    target = int(master.command("INFO", "replication")["master_repl_offset"])

    def replicated() -> bool:
        info = master.command("INFO", "replication")
        offsets = [int(v["offset"]) for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return bool(offsets) and min(offsets) >= target

    wait_until(replicated, 30, f"replicated by the replicas of {master.port}")


def test_the_pipeline_runs_on_every_master(client, cluster, rt):
    run = uuid.uuid4().hex[:6]
    sessions: dict[str, str] = {}
    while len(sessions) < 12 or len(masters_holding(cluster, [ids.shard(TENANT, s) for s in sessions.values()])) < 3:
        user = f"cl{run}-{len(sessions)}"  # users until every master holds some of their sessions
        sessions[user] = f"{user}-s"
    users = list(sessions)
    job_ids = [remember(client, u, sessions[u], i) for i, u in enumerate(users)]
    jobs = client.wait(job_ids, timeout=90)
    assert {j.state for j in jobs} == {"done"}, [(j.state, j.error) for j in jobs]
    hit = client.recall(user_id=users[1], query="what game do I play?")
    assert any("chess" in e.summary.lower() or "chess" in " ".join(e.keywords).lower() for e in hit.events)
    assert rt.state.jobs.pending() == 0

    undone = client.rollback(sessions[users[1]])  # undo: its retraction runs and is recorded as done
    assert [m.message_id for m in undone.removed] == ["m1"]
    wait_until(lambda: not rt.working.unfinished_retractions(0, 10)
               and not client.recall(user_id=users[1], query="chess").events, 60, "the undone message forgotten")

    receipt = client.erase(users[2])
    assert receipt.complete and not any(receipt.remaining.values()), receipt
    assert not rt.working.owned_sessions(TENANT, users[2])
    assert not rt.state.client.exists(keys.session(TENANT, sessions[users[2]]).meta)
    assert rt.state.counters.product(TENANT)["messages"] >= len(users)


def test_a_killed_worker_loses_nothing(client, cstack, rt):
    """Started again, the worker puts back what it held, and re-sends what Redis handed it by BRPOP in the
    moment it died (a solo worker reads its socket between batches): in no queue and no worker's hash, such a
    job would wait for ``memory.redrive``, which is off here (no beat, and none sent)."""
    run = uuid.uuid4().hex[:6]
    worker = cstack.procs["worker-pipeline"]
    job_ids = [remember(client, f"kw{run}-{i % 4}", f"kw{run}-{i % 4}-s", i) for i in range(20)]
    os.killpg(worker.pid, signal.SIGKILL)  # the whole worker, mid-traffic
    worker.wait(10)
    job_ids += [remember(client, f"kw{run}-{i % 4}", f"kw{run}-{i % 4}-s", i) for i in range(20, 40)]
    cstack.start_one("worker-pipeline")  # as a supervisor would: it puts back what its previous run held
    cstack.wait_ready(wait_embedder=False)
    jobs = client.wait(job_ids, timeout=60)
    assert [j.job_id for j in jobs if j.state != "done"] == []
    assert rt.state.jobs.pending() == 0


def test_a_master_killed_fails_over_to_its_replica_and_nothing_accepted_is_lost(client, cluster, rt):
    run = uuid.uuid4().hex[:6]
    victim = cluster.masters()[0]
    sessions = [f"fo{run}-{i}-s" for i in range(60)]
    on_victim = [s for s in sessions if cluster.master_of(keys_slot(ids.shard(TENANT, s))).port == victim.port]
    assert on_victim, "no session on the master to kill"
    before = [remember(client, s[:-2], s, i) for i, s in enumerate(on_victim)]
    for node in cluster.masters():  # what the masters acknowledged is on their replicas
        caught_up(node)
    killed = cluster.kill_master(keys_slot(ids.shard(TENANT, on_victim[0])))
    after = [remember(client, s[:-2], s, 100 + i) for i, s in enumerate(on_victim)]  # 503s until promoted
    cluster.wait_failover()
    jobs = client.wait(before + after, timeout=180)
    assert {j.state for j in jobs} == {"done"}, [(j.job_id, j.state, j.error) for j in jobs if j.state != "done"]
    for s in on_victim:  # each session holds both its messages, in order
        assert [m.message_id for m in client.messages(s).messages][-2:] == [f"m{on_victim.index(s)}",
                                                                              f"m{100 + on_victim.index(s)}"]
    cluster.restart(killed)  # back, as a replica of the promoted one
    assert killed.node_id in {r.node_id for m in cluster.masters() for r in cluster.replicas_of(m)}
