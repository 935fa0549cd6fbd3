"""The local Valkey Cluster (``workers.local.cluster``) against a real ``RedisCluster`` client: the slots spread
over the masters, hash tags keep keys (and a script over them) on one slot, and a master killed with -9 is
replaced by its replica with no acknowledged write lost, then comes back as that replica's replica.

The tests of this file share one cluster; the fault test runs last and leaves it whole again."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    ClusterCrossSlotError,
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    SlotNotCoveredError,
    TimeoutError,
)

from workers.local.cluster import HOST, LocalCluster, LocalNode

pytestmark = pytest.mark.stack  # starts server processes

T = TypeVar("T")
#: What a client sees of a master that is gone until the cluster has promoted its replica.
FAILING_OVER = (ConnectionError, TimeoutError, ClusterDownError, SlotNotCoveredError)
#: Writes two keys and reads them back in one script: only possible when both are in one slot.
SET_BOTH = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[2]); " \
           "return redis.call('MGET', KEYS[1], KEYS[2])"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), masters=3, replicas_per_master=1, node_timeout_ms=2000)
    try:
        yield local.start()
    finally:  # start() stops what it started when it fails; this covers a failing test
        local.stop()


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[RedisCluster]:
    with cluster.client() as c:
        yield c


def poll(read: Callable[[], T], timeout: float = 20) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except FAILING_OVER:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def client_node(client: RedisCluster, node: LocalNode) -> ClusterNode:
    """The client's handle on ``node``, to send it a command (``get_node`` answers ``None`` for an unknown one,
    and a command sent to ``None`` goes to the default node instead)."""
    handle = client.get_node(host=HOST, port=node.port)
    assert handle is not None, f"the client does not know node {node.port}"
    return handle


def test_the_cluster_forms_with_three_masters_each_with_a_replica(cluster: LocalCluster) -> None:
    masters = cluster.masters()
    assert len(masters) == 3
    assert sorted(state.slot_count for state in cluster.view().values() if state.role == "master") == \
        [5461, 5461, 5462]
    assert all(len(cluster.replicas_of(master)) == 1 for master in masters)
    assert all(node.pid for node in cluster.nodes)
    with RedisCluster.from_url(cluster.url) as by_url:  # one node is enough to discover the rest
        assert len(by_url.get_primaries()) == 3 and len(by_url.get_replicas()) == 3


def test_keys_spread_over_every_master(cluster: LocalCluster, client: RedisCluster) -> None:
    keys = [f"spread:{i}" for i in range(1000)]
    for i, key in enumerate(keys):
        client.set(key, str(i))
    assert client.mget_nonatomic(keys) == [str(i) for i in range(1000)]
    held = [len(master.command("KEYS", "spread:*")) for master in cluster.masters()]  # what each really stores
    assert sum(held) == 1000 and min(held) > 250, held


def test_a_script_runs_over_keys_of_one_hash_tag_only(cluster: LocalCluster, client: RedisCluster) -> None:
    a, b = "{user:42}:profile", "{user:42}:facts"
    assert client.cluster_keyslot(a) == client.cluster_keyslot(b) == client.keyslot("user:42")  # the server agrees
    assert client.eval(SET_BOTH, 2, a, b, "p", "f") == ["p", "f"]

    node = cluster.master_of(client.keyslot("x"))
    # another slot of the same master: CROSSSLOT is about slots, not about which node holds them
    other = next(key for key in (f"y{i}" for i in range(10_000))
                 if client.keyslot(key) != client.keyslot("x") and cluster.master_of(client.keyslot(key)) is node)
    with pytest.raises(RedisClusterException, match="same key slot"):  # redis-py refuses before sending
        client.eval(SET_BOTH, 2, "x", other, "1", "2")
    with pytest.raises(ClusterCrossSlotError):  # and so does the server, sent it anyway (its CROSSSLOT error)
        client.execute_command("EVAL", SET_BOTH, 2, "x", other, "1", "2",
                               target_nodes=client_node(client, node))


def test_a_killed_master_fails_over_keeps_acknowledged_writes_and_rejoins(cluster: LocalCluster,
                                                                           client: RedisCluster) -> None:
    written = {f"durable:{i}": str(i) for i in range(1000)}
    for key, value in written.items():
        client.set(key, value)
    # WAIT counts the writes of its own connection: the client's one connection to each primary wrote them
    for primary in client.get_primaries():
        assert client.wait(1, 0, target_nodes=primary) == 1
    (replica,) = cluster.replicas_of(cluster.master_of(0))

    killed = cluster.kill_master(slot=0)
    began = time.monotonic()
    cluster.wait_failover()
    failover_s = time.monotonic() - began

    assert killed.pid is None and cluster.master_of(0) is replica
    assert len(cluster.masters()) == 3
    assert poll(lambda: client.mget_nonatomic(list(written))) == list(written.values())
    assert failover_s < 10, failover_s  # node timeout 2 s (a busy box must not fail over unasked), then the vote

    cluster.restart(killed)
    assert cluster.view()[killed.node_id].role == "replica"
    assert cluster.replicas_of(replica) == [killed]
    assert killed.command("DBSIZE") == replica.command("DBSIZE")  # synced from the new master
    moved = next(key for key in written if cluster.master_of(client.keyslot(key)) is replica)
    client.set(moved, "after rejoin")
    assert client.wait(1, 0, target_nodes=client_node(client, replica)) == 1  # and replicates to the old one
