"""A Valkey Cluster on this machine, for the tests and benchmarks that need one: ``masters`` masters with
``replicas_per_master`` replicas each, every node a ``valkey-server`` on free loopback ports with a directory of
its own (data, cluster config file, log) under ``data_dir``.

There is no ``valkey-cli`` here, so the cluster is formed with plain cluster commands (MEET, ADDSLOTSRANGE,
REPLICATE) and then polled until every node says it is whole. A fault test kills a master
(:meth:`LocalCluster.kill_master`), waits for its replica to take over (:meth:`LocalCluster.wait_failover`) and
brings the old master back, which rejoins as a replica of the new one (:meth:`LocalCluster.restart`)::

    with LocalCluster(tmp_path) as cluster, cluster.client() as client:
        client.set("k", "v")
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Self

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from workers.local.stack import REDIS_MEMORY, free_port, valkey_binary

HOST = "127.0.0.1"
SLOTS = 16384
#: Flags of a peer a node does not (yet) count as a healthy member.
UNHEALTHY = frozenset({"fail", "fail?", "handshake", "noaddr"})


@dataclass
class LocalNode:
    """One ``valkey-server`` of the cluster: where it listens and keeps its files, and its process (``None``
    once killed). Ports and directory stay the same across a restart, so the node comes back as itself."""

    index: int
    port: int
    bus_port: int
    dir: Path
    node_id: str = ""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def log(self) -> Path:
        return self.dir / "valkey.log"

    def command(self, *args: str | int) -> Any:
        """One command on a connection of its own, without redis-py's retries: the callers poll, and a node that
        is down must answer with an error at once rather than after a backoff."""
        with redis.Redis(HOST, self.port, decode_responses=True, socket_timeout=2,
                         retry=Retry(NoBackoff(), 0)) as conn:
            return conn.execute_command(*args)

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


@dataclass(frozen=True)
class NodeState:
    """One line of CLUSTER NODES: a node as some node of the cluster sees it."""

    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    slots: tuple[tuple[int, int], ...]  # inclusive ranges

    @property
    def role(self) -> str:
        return "master" if "master" in self.flags else "replica"

    @property
    def slot_count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.slots)

    @classmethod
    def parse(cls, line: str) -> NodeState:
        # <id> <ip:port@cport[,hostname]> <flags> <master id or -> <ping> <pong> <epoch> <link> <slot>...
        fields = line.split()
        slots = []
        for entry in fields[8:]:
            if entry.startswith("["):  # a slot being migrated or imported, still served by its owner
                continue
            lo, _, hi = entry.partition("-")
            slots.append((int(lo), int(hi or lo)))
        return cls(node_id=fields[0], port=int(fields[1].split("@")[0].rsplit(":", 1)[1]),
                   flags=frozenset(fields[2].split(",")), master_id=None if fields[3] == "-" else fields[3],
                   slots=tuple(slots))


def _info(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


class LocalCluster:
    """``masters * (1 + replicas_per_master)`` nodes; the first ``masters`` of :attr:`nodes` start as masters,
    each with an even share of the slots, the others as their replicas (in order: master 0's first)."""

    def __init__(self, data_dir: Path, masters: int = 3, replicas_per_master: int = 1,
                 node_timeout_ms: int = 1000) -> None:
        self.root = Path(data_dir).resolve() / "cluster"
        self.master_count = masters
        self.replicas_per_master = replicas_per_master
        # how long a node may be unreachable before it is suspected; a failover takes this plus ~0.5 s (the
        # failure reports reaching a majority of masters, then their votes)
        self.node_timeout_ms = node_timeout_ms
        ports = self._free_ports(2 * masters * (1 + replicas_per_master))
        self.nodes = [LocalNode(index=i, port=ports[2 * i], bus_port=ports[2 * i + 1], dir=self.root / f"node-{i}")
                      for i in range(len(ports) // 2)]

    @staticmethod
    def _free_ports(count: int) -> list[int]:
        ports: list[int] = []
        while len(ports) < count:  # the OS may hand a port it just released out twice
            if (port := free_port()) not in ports:
                ports.append(port)
        return ports

    # --- what clients use -------------------------------------------------------------------
    @property
    def startup_nodes(self) -> list[ClusterNode]:
        # redis-py leaves ClusterNode.__init__ unannotated
        return [ClusterNode(HOST, node.port) for node in self.nodes]  # type: ignore[no-untyped-call]

    @property
    def url(self) -> str:
        """A URL for ``RedisCluster.from_url``: one node, from which the client discovers the others."""
        return f"redis://{HOST}:{self.nodes[0].port}"

    def client(self, **kwargs: Any) -> RedisCluster:
        """A cluster client knowing every node, so it still finds the cluster when some are down (close it)."""
        options: dict[str, Any] = {"decode_responses": True, **kwargs}
        return RedisCluster(startup_nodes=self.startup_nodes, **options)

    # --- the cluster's own view ---------------------------------------------------------------
    def view(self, observer: LocalNode | None = None) -> dict[str, NodeState]:
        """Every node by id, as ``observer`` (by default the first live node) sees it."""
        observer = observer or next(node for node in self.nodes if node.alive)
        text: str = observer.command("CLUSTER", "NODES")
        return {state.node_id: state for state in map(NodeState.parse, text.splitlines())}

    def node(self, node_id: str) -> LocalNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def masters(self) -> list[LocalNode]:
        """The live nodes serving slots now."""
        return [self.node(s.node_id) for s in self.view().values()
                if s.role == "master" and s.slots and self.node(s.node_id).alive]

    def replicas_of(self, master: LocalNode) -> list[LocalNode]:
        return [self.node(s.node_id) for s in self.view().values() if s.master_id == master.node_id]

    def master_of(self, slot: int) -> LocalNode:
        for state in self.view().values():
            if state.role == "master" and any(lo <= slot <= hi for lo, hi in state.slots):
                return self.node(state.node_id)
        raise LookupError(f"no master serves slot {slot}")

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 30) -> Self:
        try:
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, timeout: float) -> None:
        for node in self.nodes:
            self._spawn(node)
        self._poll(partial(self._answering, self.nodes), "nodes answering", timeout)
        masters, replicas = self.nodes[:self.master_count], self.nodes[self.master_count:]
        for node in self.nodes:
            node.node_id = node.command("CLUSTER", "MYID")
            # a distinct config epoch per node, as valkey-cli gives them, so no epoch collision is left for
            # gossip to settle after the slots are assigned
            node.command("CLUSTER", "SET-CONFIG-EPOCH", node.index + 1)
        for i, master in enumerate(masters):
            master.command("CLUSTER", "ADDSLOTSRANGE", SLOTS * i // len(masters), SLOTS * (i + 1) // len(masters) - 1)
        for node in self.nodes[1:]:
            self.nodes[0].command("CLUSTER", "MEET", HOST, node.port, node.bus_port)  # bus port: not port+10000
        for i, replica in enumerate(replicas):
            master = masters[i // self.replicas_per_master]
            # "Unknown node" until the gossip that started with the MEETs has told the replica about its master
            self._poll(partial(self._replicate, replica, master), f"node {replica.port} replicating", timeout)
        # a master says cluster_state:ok no sooner than 2 s after it started (Valkey's CLUSTER_WRITABLE_DELAY,
        # fixed): forming takes that long whatever is polled
        self._poll(self._problem, "cluster formed", timeout)

    @staticmethod
    def _replicate(replica: LocalNode, master: LocalNode) -> str | None:
        replica.command("CLUSTER", "REPLICATE", master.node_id)
        return None

    def _spawn(self, node: LocalNode) -> None:
        node.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        cmd = [valkey_binary(), "--port", str(node.port), "--bind", HOST, "--protected-mode", "no",
               "--dir", str(node.dir), "--cluster-enabled", "yes",
               "--cluster-config-file", str(node.dir / "nodes.conf"), "--cluster-port", str(node.bus_port),
               "--cluster-node-timeout", str(self.node_timeout_ms),
               "--appendonly", "yes", "--save", "",
               # a full sync starts at once, not 5 s later (waiting for more replicas to share it), and the replica
               # loads it from the socket: one saved to disk first is noticed by a once-a-second cron (~1 s a sync)
               "--repl-diskless-sync-delay", "0", "--repl-diskless-load", "swapdb", *REDIS_MEMORY]
        fd = os.open(node.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:  # the child keeps its own handle; a restart appends
            node.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill_master(self, slot: int = 0) -> LocalNode:
        """kill -9 the master serving ``slot`` and return it. Its replica takes over only if the masters left
        are a majority of all masters (they vote): at least 3 masters for one to fail."""
        if self.master_count < 3:
            raise ValueError(f"a failover needs a majority of masters left: {self.master_count} masters is too few")
        master = self.master_of(slot)
        self._kill(master)
        return master

    def wait_failover(self, timeout: float = 30) -> None:
        """Wait until the cluster is whole again without the killed nodes: every live node sees them failed and
        every slot served by a live master (a promoted replica), and says ``cluster_state:ok``."""
        self._poll(self._problem, "failover", timeout)

    def restart(self, node: LocalNode, timeout: float = 30) -> None:
        """Start a killed node again with its ports, data and cluster config file and wait until the cluster is
        whole with it: an old master learns from its peers that its slots have a newer owner and turns into that
        owner's replica."""
        if node.alive:
            raise ValueError(f"node {node.port} is running")
        self._spawn(node)
        self._poll(partial(self._answering, [node]), f"node {node.port} answering", timeout)
        self._poll(self._problem, f"node {node.port} rejoining", timeout)

    def stop(self) -> None:
        """Kill every node and remove the cluster's files."""
        for node in self.nodes:
            self._kill(node)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def _kill(node: LocalNode) -> None:
        if node.proc is None:
            return
        if node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGKILL)  # the group: a fork saving for a full sync goes too
        node.proc.wait()
        node.proc = None

    # --- polling ------------------------------------------------------------------------------
    def _poll(self, problem: Callable[[], str | None], what: str, timeout: float) -> None:
        """Until ``problem`` finds none (returns ``None``); a node exiting on its own or the deadline fails."""
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"node {node.port} exited with {node.proc.returncode}:\n{node.tail()}")
            try:
                found = problem()
            except (redis.RedisError, OSError) as exc:
                found = f"{exc.__class__.__name__}: {exc}"
            if found is None:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not after {timeout} s: {found}")
            time.sleep(0.05)

    @staticmethod
    def _answering(nodes: list[LocalNode]) -> str | None:
        for node in nodes:
            node.command("PING")  # raises until the node listens
        return None

    def _problem(self) -> str | None:
        """What keeps the cluster from being whole, or ``None``. Whole: every live node says ``cluster_state:ok``,
        knows every node, sees the dead ones failed and the live ones healthy, sees every slot served once by a
        live master and every other live node replicating a live master; every live replica's link is up, and
        every live node lists every live replica to clients (``CLUSTER SLOTS`` leaves out a replica until the
        node has heard it holds its master's data: a client that asked it would not know the replica)."""
        live = {node.node_id for node in self.nodes if node.alive}
        replicas = set()
        for node in self.nodes:
            if not node.alive:
                continue
            info = _info(node.command("CLUSTER", "INFO"))
            if info["cluster_state"] != "ok" or int(info["cluster_known_nodes"]) != len(self.nodes):
                return (f"node {node.port}: cluster_state:{info['cluster_state']}, "
                        f"{info['cluster_known_nodes']} of {len(self.nodes)} nodes known")
            if problem := self._view_problem(node, live):
                return problem
            replication = node.command("INFO", "replication")
            if replication["role"] != "master":
                if replication["master_link_status"] != "up":
                    return f"node {node.port}: replication link {replication['master_link_status']}"
                replicas.add(node.node_id)
        for node in (node for node in self.nodes if node.alive):
            listed = {entry[2] for slots in node.command("CLUSTER", "SLOTS") for entry in slots[3:]}
            if listed != replicas:
                return f"node {node.port} lists {len(listed)} of the {len(replicas)} replicas to clients"
        return None

    def _view_problem(self, observer: LocalNode, live: set[str]) -> str | None:
        served = 0
        for state in self.view(observer).values():
            seen = f"node {observer.port} sees {state.port} {','.join(sorted(state.flags))}"
            if state.node_id not in live:
                if "fail" not in state.flags:
                    return f"{seen}: not failed yet"
            elif state.flags & UNHEALTHY:
                return seen
            elif state.role == "master":
                if not state.slots:
                    return f"{seen}: a master without slots"
                served += state.slot_count
            elif state.master_id not in live:
                return f"{seen}: replicating a dead or unknown master"
        return None if served == SLOTS else f"node {observer.port} sees {served} of {SLOTS} slots served"
