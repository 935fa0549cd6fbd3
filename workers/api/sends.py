"""What an API process sends to the workers a batch at a time: extractions, and the audit records of reads.

Each accepted message's job is pending from its accept step on (``memory/state/lua/sessions.lua``), and each
read's audit record is held in the outbox by the request that read (``memory.services.reads``), so neither
task need go out in the same breath: what this process has within ``MNEME_EXTRACT_SEND_INTERVAL_S`` of the
first item (up to a batch) goes as one task — one ``memory.extract`` naming all the jobs, with the HTTP request
id of each; one ``memory.audit`` carrying the records. A worker then receives one task message per batch
instead of one per message or read. A process that dies holding a batch loses nothing: the redrive re-sends the
extraction of every job still pending and every audit record held too long (``memory.redrive``), as it does
for a send that failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from memory.state.dispatch import Dispatch
from tasks.envelope import audit_message, batch_message

log = logging.getLogger(__name__)
T = TypeVar("T")


class Sends(Generic[T]):
    """Items sent a batch at a time from the event loop: a full batch at once, the rest after the interval."""

    def __init__(self, what: str, message: Callable[[list[T]], tuple[str, str]], dispatch: Dispatch,
                 interval_s: float, batch_size: int) -> None:
        self._what, self._message, self._dispatch = what, message, dispatch
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
            self._dispatch.push([self._message(items[i:i + self._size])])

    def close(self) -> None:
        """Send what is waiting as the process ends; if Redis is not there, the redrive will."""
        self._flush_later()

    def _flush_later(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - what they name is pending or held: the redrive sends it
            log.warning("could not send a batch of %s; the redrive will", self._what, exc_info=True)


def extraction_sends(dispatch: Dispatch, queue: str, interval_s: float, batch_size: int
                     ) -> Sends[tuple[str, str | None]]:
    """(job id, HTTP request id) of accepted messages, sent as ``memory.extract`` tasks."""
    return Sends("extractions", lambda jobs: batch_message("memory.extract", jobs, queue), dispatch, interval_s,
                 batch_size)


def audit_sends(dispatch: Dispatch, queue: str, interval_s: float, batch_size: int) -> Sends[dict[str, Any]]:
    """Audit records already held in the outbox, sent as ``memory.audit`` tasks."""
    return Sends("audit records", lambda records: audit_message(records, queue), dispatch, interval_s, batch_size)
