"""Tests run against real components: an embedded Valkey server, real Celery worker processes and
the real HTTP API, all started once per test session by the same Stack that `make run` uses."""

from __future__ import annotations

import uuid

import pytest

from memory.runtime import Runtime
from workers.client import MnemeClient
from workers.stack import Stack, free_port


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("stack"), api_port=free_port(), beat=False, flower=False,
              env={"MNEME_REDIS_URL": "", "MNEME_WINDOW_SIZE": "50", "MNEME_VERSIONS_KEPT": "20",
                   "MNEME_CONSENT_REQUIRED": "false"})
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def runtime(stack) -> Runtime:
    return Runtime(stack.settings)


@pytest.fixture
def client(stack):
    with MnemeClient(stack.api_url) as c:
        yield c


@pytest.fixture
def uid() -> str:
    """A fresh id per test, so tests share the stack without sharing users or sessions."""
    return uuid.uuid4().hex[:10]
