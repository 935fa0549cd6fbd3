"""One way to run a whole stack in tests: a real embedded Valkey, the API and Celery workers, in a fresh
data dir on free ports, with the given MNEME_* settings, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from workers.local.stack import Stack, free_port


@contextmanager
def running_stack(tmp_path_factory, name: str, flower: bool = False, **env: str) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp(name), api_port=free_port(), flower_port=free_port(), beat=False,
                  flower=flower, env={"MNEME_REDIS_URL": "", **env})
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@contextmanager
def restarted(stack: Stack, name: str, **env: str) -> Iterator[None]:
    """The stack's process ``name`` restarted with these MNEME_* settings, and as it was afterwards."""
    saved = dict(stack.env)
    stack.stop_one(name)
    stack.env.update(env)
    try:
        stack.start_one(name)
        stack.wait_ready(wait_embedder=False)
        yield
    finally:
        stack.stop_one(name)
        stack.env = saved
        stack.start_one(name)
        stack.wait_ready(wait_embedder=False)
