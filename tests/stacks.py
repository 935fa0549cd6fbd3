"""One way to run a whole stack in tests: a real embedded Valkey, the API and Celery workers, in a fresh
data dir on free ports, with the given MNEME_* settings, stopped afterwards; and one way to read or wait for
what it does (its audit records, its queues drained, a rewrite of its Redis's append-only file)."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memory.audit.file import settled_lines
from memory.embedding import TABLE_PREFIX
from memory.mneme import Mneme
from tests.polling import wait_until
from workers.celery_app import QUEUES
from workers.local.stack import Stack, free_port

#: One copy of the embedder's token table for the stacks of every test run: a data dir's first start writes the
#: table (63 MB) into its ``models/``, ~1 GB over a run's stacks on a CI disk that may have little room.
MODELS = Path(tempfile.gettempdir()) / f"mneme-test-models-{os.getuid()}"


def master_key() -> str:
    """A fresh master key, as an operator makes one for a stack with auth on (`openssl rand -base64 32`)."""
    return base64.b64encode(os.urandom(32)).decode()


@contextmanager
def running_stack(tmp_path_factory, name: str, flower: bool = False, **env: str) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp(name), api_port=free_port(), flower_port=free_port(), beat=False,
                  flower=flower, env={"MNEME_REDIS_URL": "", **env})
    try:  # a stack that fails to start still has processes to stop
        yield _started(stack)
    finally:
        stack.stop()


def _started(stack: Stack) -> Stack:
    """``stack`` started with the embedder's token table linked from the tests' one copy (which is this stack's
    own the first time)."""
    _link_tables(MODELS, stack.data_dir / "models")
    stack.start()
    _link_tables(stack.data_dir / "models", MODELS)
    return stack


def _link_tables(source: Path, target: Path) -> None:
    for table in source.glob(f"{TABLE_PREFIX}*"):
        if table.suffix == ".tmp":  # being written
            continue
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.link(table, target / table.name)  # the table is replaced whole, never written in place
        except OSError:  # there already, or another file system: this stack keeps a copy of its own
            pass


@contextmanager
def restarted(stack: Stack, name: str, **env: str) -> Iterator[None]:
    """The stack's process ``name`` restarted with these MNEME_* settings, and as it was afterwards."""
    saved = dict(stack.env)
    stack.stop_one(name)
    stack.env.update(env)
    try:
        stack.start_one(name)
        stack.wait_ready(wait_embedder=name == "api")  # an API answers recalls once its model is loaded
        yield
    finally:
        stack.stop_one(name)
        stack.env = saved
        stack.start_one(name)
        stack.wait_ready(wait_embedder=name == "api")


def audit_records(stack: Stack) -> list[dict]:
    """The records in the stack's audit file, as it was at a moment no writer was mid-append (the stack's
    workers may be writing to it)."""
    return [json.loads(raw) for raw in settled_lines(Path(stack.settings.audit.removeprefix("file://")))]


def drain(rt: Mneme, timeout: float = 60.0) -> None:
    """Until every queue is empty and nothing is in flight (kombu keeps late-ack messages unacknowledged)."""
    wait_until(lambda: sum(rt.state.client.llen(q) for q in QUEUES) == 0 and rt.state.broker.in_flight() == 0,
               timeout, f"queues drained (queued {[rt.state.client.llen(q) for q in QUEUES]}, "
                        f"in flight {rt.state.broker.in_flight()})")


def wait_aof_rewrite(rt: Mneme, after: int | None = None, timeout: float = 60.0) -> None:
    """Until no rewrite of Redis's append-only file is running or scheduled (and, with ``after``, the count of
    rewrites is past it: one more has finished)."""
    def done() -> bool:
        info = rt.state.client.info("persistence")
        return not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]) and (
            after is None or info["aof_rewrites"] > after)

    wait_until(done, timeout, "an append-only file rewrite")
