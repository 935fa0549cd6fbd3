"""Tests run against real components: an embedded Valkey server, real Celery worker processes and
the real HTTP API, all started once per test session by the same Stack that `make run` uses."""

from __future__ import annotations

import uuid

import pytest

from memory.runtime import Runtime
from tests.stacks import running_stack
from workers.client import MnemeClient
from workers.local.stack import Stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory, "stack", MNEME_WINDOW_SIZE="50", MNEME_VERSIONS_KEPT="20",
                       MNEME_CONSENT_REQUIRED="false") as s:
        yield s


@pytest.fixture(scope="session")
def valkey_url(tmp_path_factory):
    """A Valkey server and nothing else, for tests of what only needs Redis."""
    only = Stack(tmp_path_factory.mktemp("valkey"), env={"MNEME_REDIS_URL": ""})
    only.start_redis()
    yield only.env["MNEME_REDIS_URL"]
    only.stop()


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
