"""The sync and the async client: one transport each (httpx), the same endpoints (``_calls``), the same retry
policy (``Retries``). A method of either client is an endpoint of ``_calls`` bound to it, so both have the
same methods with the same signatures and documentation, written once."""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import random
import time
import typing
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from mneme_client import _calls as calls
from mneme_client._calls import ENDED, Call
from mneme_client.errors import ConnectionFailed, MnemeAPIError, MnemeError, api_error
from mneme_client.models import JobStatus

P = ParamSpec("P")
T = TypeVar("T")
RETRIED = frozenset({429, 503})  # the API says: nothing was done, try again (after Retry-After)
DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Retries:
    """How a call is tried again after a 429 or 503 (or when the API cannot be reached): up to ``attempts``
    more times, waiting the answer's ``Retry-After`` or else ``backoff_s`` doubling each time (with jitter),
    never more than ``max_wait_s`` at once."""

    attempts: int = 4
    backoff_s: float = 0.25
    max_wait_s: float = 30.0

    def after(self, error: MnemeError, attempt: int) -> float:
        """How long to wait before trying a call again that failed with ``error`` (its ``attempt``-th retry,
        from 0); raises ``error`` when it is not one to retry or the retries are spent."""
        if isinstance(error, MnemeAPIError) and error.status not in RETRIED or attempt >= self.attempts:
            raise error
        retry_after = error.retry_after if isinstance(error, MnemeAPIError) else None
        if retry_after is not None:
            return min(retry_after, self.max_wait_s)
        wait: float = min(self.max_wait_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
        return wait


def _unreachable(base_url: str, exc: Exception) -> ConnectionFailed:
    return ConnectionFailed(f"could not reach {base_url}: {exc}")


def _ended(jobs: list[JobStatus], deadline: float, timeout: float) -> bool:
    """Whether every job has ended; TimeoutError once ``deadline`` passed without."""
    if all(j.state in ENDED for j in jobs):
        return True
    if time.monotonic() > deadline:
        raise TimeoutError(f"jobs not finished after {timeout}s: {[(j.job_id, j.state) for j in jobs]}")
    return False


def _headers(api_key: str | None, agent: str | None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if agent:
        headers["X-Mneme-Agent"] = agent  # who reads, for the read audit
    return headers


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters as the API reads them: absent when None, booleans as true/false."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in params.items() if v is not None}


def _answer(call: Call[T], response: httpx.Response) -> T | MnemeAPIError:
    """The call's answer, or the error the response is."""
    if response.is_success or response.status_code in call.answers:
        return call.read(response.json())
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    retry_after = response.headers.get("retry-after")
    return api_error(response.status_code, str(body.get("error", "http_error")),
                     str(body.get("message", response.text[:500])),
                     float(retry_after) if retry_after and retry_after.isdigit() else None)


class _Settings:
    def __init__(self, base_url: str, api_key: str | None, agent: str | None, timeout: float,
                 retries: Retries | None) -> None:
        self.base_url, self.headers, self.timeout = base_url, _headers(api_key, agent), timeout
        self.retries = retries or Retries()


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[MnemeClient, P], T]:
    def method(self: MnemeClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))
    return _like(method, build)


def _async(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncMnemeClient, P], Coroutine[Any, Any, T]]:
    async def method(self: AsyncMnemeClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))
    return _like(method, build)


F = TypeVar("F", bound=Callable[..., Any])


def _like(method: F, build: Callable[..., Call[Any]]) -> F:
    """The client method of endpoint ``build``: its name, documentation and signature (self, then the
    endpoint's parameters, returning what its call answers), for help() and editors."""
    functools.update_wrapper(method, build)
    del method.__wrapped__  # type: ignore[attr-defined]  # set just now; its signature would be the endpoint's
    signature = inspect.signature(build)
    answer = typing.get_args(typing.get_type_hints(build)["return"])[0]
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self, *signature.parameters.values()], return_annotation=answer)
    return method


class MnemeClient:
    """The Mneme API, synchronously. ``api_key``: sent as ``Authorization: Bearer`` (not needed against a
    server without auth); ``agent``: the agent calling, named in the read audit beside the key."""

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None, agent: str | None = None,
                 timeout: float = 30.0, retries: Retries | None = None, transport: httpx.BaseTransport | None = None
                 ) -> None:
        self.settings = _Settings(base_url, api_key, agent, timeout, retries)
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=self.settings.headers,
                                  transport=transport)

    def __enter__(self) -> MnemeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """Run one call, retrying as ``Retries`` says; its answer, or the ``MnemeError`` it ended with."""
        for attempt in itertools.count():
            outcome: T | MnemeError
            try:
                outcome = _answer(call, self._http.request(call.method, call.path, json=call.json,
                                                           params=_params(call.params)))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                outcome = _unreachable(self.settings.base_url, exc)
            if not isinstance(outcome, MnemeError):
                return outcome
            time.sleep(self.settings.retries.after(outcome, attempt))
        raise AssertionError("unreachable")  # the loop returns or raises

    def wait(self, job_ids: list[str], timeout: float = 60.0, interval: float = 0.1) -> list[JobStatus]:
        """Poll until every job has ended (done, failed, dropped, retracted); TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not _ended(jobs := [self.job(j) for j in job_ids], deadline, timeout):
            time.sleep(interval)
        return jobs

    remember = _sync(calls.remember)
    remember_many = _sync(calls.remember_many)
    messages = _sync(calls.messages)
    message = _sync(calls.message)
    rollback = _sync(calls.rollback)
    delete_message = _sync(calls.delete_message)
    delete_session = _sync(calls.delete_session)
    sessions = _sync(calls.sessions)
    recall = _sync(calls.recall)
    events = _sync(calls.events)
    delete_events = _sync(calls.delete_events)
    profile = _sync(calls.profile)
    correct = _sync(calls.correct)
    delete_belief = _sync(calls.delete_belief)
    history = _sync(calls.history)
    reviews = _sync(calls.reviews)
    resolve = _sync(calls.resolve)
    vocabulary = _sync(calls.vocabulary)
    purposes = _sync(calls.purposes)
    policy = _sync(calls.policy)
    consent = _sync(calls.consent)
    grant = _sync(calls.grant)
    withdraw = _sync(calls.withdraw)
    set_child = _sync(calls.set_child)
    erase = _sync(calls.erase)
    export = _sync(calls.export)
    page_link = _sync(calls.page_link)
    reads = _sync(calls.reads)
    feedback = _sync(calls.feedback)
    metrics = _sync(calls.metrics)
    job = _sync(calls.job)
    health = _sync(calls.health)


class AsyncMnemeClient:
    """The Mneme API for asyncio: the same methods as ``MnemeClient``, each awaited."""

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None, agent: str | None = None,
                 timeout: float = 30.0, retries: Retries | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = _Settings(base_url, api_key, agent, timeout, retries)
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=self.settings.headers,
                                       transport=transport)

    async def __aenter__(self) -> AsyncMnemeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Run one call, retrying as ``Retries`` says; its answer, or the ``MnemeError`` it ended with."""
        for attempt in itertools.count():
            outcome: T | MnemeError
            try:
                outcome = _answer(call, await self._http.request(call.method, call.path, json=call.json,
                                                                 params=_params(call.params)))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                outcome = _unreachable(self.settings.base_url, exc)
            if not isinstance(outcome, MnemeError):
                return outcome
            await asyncio.sleep(self.settings.retries.after(outcome, attempt))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def wait(self, job_ids: list[str], timeout: float = 60.0, interval: float = 0.1) -> list[JobStatus]:
        """Poll until every job has ended (done, failed, dropped, retracted); TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not _ended(jobs := [await self.job(j) for j in job_ids], deadline, timeout):
            await asyncio.sleep(interval)
        return jobs

    remember = _async(calls.remember)
    remember_many = _async(calls.remember_many)
    messages = _async(calls.messages)
    message = _async(calls.message)
    rollback = _async(calls.rollback)
    delete_message = _async(calls.delete_message)
    delete_session = _async(calls.delete_session)
    sessions = _async(calls.sessions)
    recall = _async(calls.recall)
    events = _async(calls.events)
    delete_events = _async(calls.delete_events)
    profile = _async(calls.profile)
    correct = _async(calls.correct)
    delete_belief = _async(calls.delete_belief)
    history = _async(calls.history)
    reviews = _async(calls.reviews)
    resolve = _async(calls.resolve)
    vocabulary = _async(calls.vocabulary)
    purposes = _async(calls.purposes)
    policy = _async(calls.policy)
    consent = _async(calls.consent)
    grant = _async(calls.grant)
    withdraw = _async(calls.withdraw)
    set_child = _async(calls.set_child)
    erase = _async(calls.erase)
    export = _async(calls.export)
    page_link = _async(calls.page_link)
    reads = _async(calls.reads)
    feedback = _async(calls.feedback)
    metrics = _async(calls.metrics)
    job = _async(calls.job)
    health = _async(calls.health)
