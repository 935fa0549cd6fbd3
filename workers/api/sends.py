"""What an API process sends to the workers a batch at a time: extractions, and the audit records of reads.

Each accepted message's job is pending from its accept step on (``memory/state/lua/sessions.lua``), and each
read's audit record is held in the outbox by the request that read (``memory.services.reads``), so neither
task need go out in the same breath: what this process has within ``MNEME_EXTRACT_SEND_INTERVAL_S`` of the
first item (up to a batch) goes as one task — one ``memory.extract`` naming all the jobs, with the HTTP request
id of each; one ``memory.audit`` carrying the records. A worker then receives one task message per batch
instead of one per message or read. A process that dies holding a batch loses nothing: the redrive re-sends the
extraction of every job still pending and every audit record held too long (``memory.redrive``), as it does
for a send that failed.

Extractions go through their tenants' lines (``memory.state.fairness``): a batch's jobs each tenant has room
for are sent, the others wait their turn, and a tenant whose line is full is answered 429 before a message of
it is accepted (``Extractions.check``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from memory.errors import RateLimited
from memory.state.dispatch import Dispatch
from memory.state.fairness import FairShare, Sent
from tasks.envelope import audit_message, extract_messages

log = logging.getLogger(__name__)
T = TypeVar("T")


class Sends(Generic[T]):
    """Items sent a batch at a time from the event loop: a full batch at once, the rest after the interval."""

    def __init__(self, what: str, messages: Callable[[list[T]], list[tuple[str, str]]], dispatch: Dispatch,
                 interval_s: float, batch_size: int) -> None:
        self._what, self._messages, self._dispatch = what, messages, dispatch
        self._interval, self._size = interval_s, batch_size
        self._items: list[T] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, items: Sequence[T]) -> None:
        """Send these with the batch they join, or now (on the event loop)."""
        self._items.extend(items)
        if len(self._items) >= self._size or self._interval <= 0:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._flush_later)

    def flush(self) -> None:
        """Send what is waiting, as one task (a Redis error reaches the caller: the request that filled the
        batch answers 503, and the redrive re-sends what it held)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items, self._items = self._items, []
        for i in range(0, len(items), self._size):
            self._dispatch.push(self._messages(items[i:i + self._size]))

    def close(self) -> None:
        """Send what is waiting as the process ends; if Redis is not there, the redrive will."""
        self._flush_later()

    def _flush_later(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - what they name is pending or held: the redrive sends it
            log.warning("could not send a batch of %s; the redrive will", self._what, exc_info=True)


RETRY_AFTER_S = 2  # what a tenant whose line is full is told to wait: its pipeline takes ~600 jobs meanwhile
_RECHECK_S = 1.0  # a full line, as this process last saw it, is looked at again after this long


class Extractions:
    """Accepted messages' jobs ((tenant, job id, HTTP request id)) sent as ``memory.extract`` tasks, through
    their tenants' lines: those let in at once, the rest when the tenant's earlier jobs end."""

    def __init__(self, fair: FairShare, dispatch: Dispatch, queue: str, interval_s: float, batch_size: int,
                 queue_limit: int) -> None:
        self._fair, self._queue, self._size, self._limit = fair, queue, batch_size, queue_limit
        self._waiting: dict[str, tuple[int, float]] = {}  # tenant → (jobs waiting, when seen), as last seen
        self._sends: Sends[tuple[str, str, str | None]] = Sends("extractions", self._let_in, dispatch, interval_s,
                                                                 batch_size)

    def check(self, tenant: str) -> None:
        """429 for a tenant with ``MNEME_TENANT_QUEUE_LIMIT`` messages waiting, before its next is accepted (as
        this process last saw the line; a full one is read again after a second)."""
        waiting, seen = self._waiting.get(tenant, (0, 0.0))
        if waiting < self._limit:
            return
        if time.monotonic() - seen > _RECHECK_S:
            waiting = self._fair.queued(tenant)[1]
            self._waiting[tenant] = (waiting, time.monotonic())
        if waiting >= self._limit:
            raise RateLimited(f"{waiting} messages of this tenant are waiting for the pipeline (the limit is "
                              f"{self._limit}): retry in {RETRY_AFTER_S} s", retry_after_s=RETRY_AFTER_S)

    def add(self, tenant: str, job_id: str, request_id: str | None) -> None:
        self._sends.add([(tenant, job_id, request_id)])

    def close(self) -> None:
        self._sends.close()

    def _let_in(self, items: list[tuple[str, str, str | None]]) -> list[tuple[str, str]]:
        jobs: dict[str, list[Sent]] = defaultdict(list)
        for tenant, job_id, rid in items:
            jobs[tenant].append((job_id, rid))
        places = self._fair.admit(jobs)
        now = time.monotonic()
        self._waiting.update({tenant: (place.waiting, now) for tenant, place in places.items()})
        return extract_messages([sent for place in places.values() for sent in place.let_in], self._queue,
                                   self._size)


def audit_sends(dispatch: Dispatch, queue: str, interval_s: float, batch_size: int) -> Sends[dict[str, Any]]:
    """Audit records already held in the outbox, sent as ``memory.audit`` tasks."""
    return Sends("audit records", lambda records: [audit_message(records, queue)], dispatch, interval_s, batch_size)
