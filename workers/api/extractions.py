"""The extraction tasks of the messages an API process accepts, sent a batch at a time.

Each accepted message's job is pending from its accept step on (``memory/state/lua/sessions.lua``), so the
task that takes it to extraction need not go out in the same breath: what this process accepts within
``MNEME_EXTRACT_SEND_INTERVAL_S`` of the first (up to ``MNEME_EXTRACT_BATCH_SIZE`` messages) goes as one
``memory.extract`` task naming all their jobs, with the HTTP request id of each. A pipeline worker then
receives one task message per batch instead of one per message, which is most of what it spends on a
message besides extracting it. A process that dies holding a batch loses no message: the redrive re-sends
the extraction of every job still pending (``memory.redrive``), as it does for a send that failed.
"""

from __future__ import annotations

import asyncio
import logging

from memory.state.dispatch import Dispatch
from tasks.envelope import batch_message

log = logging.getLogger(__name__)


class ExtractionSends:
    def __init__(self, dispatch: Dispatch, queue: str, interval_s: float, batch_size: int) -> None:
        self._dispatch, self._queue, self._interval, self._size = dispatch, queue, interval_s, batch_size
        self._jobs: list[tuple[str, str | None]] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, job_id: str, request_id: str | None) -> None:
        """Send the extraction of an accepted message's job: with the batch it joins, or now."""
        self._jobs.append((job_id, request_id))
        if len(self._jobs) >= self._size or self._interval <= 0:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._flush_later)

    def flush(self) -> None:
        """Send what is waiting, as one task (a Redis error reaches the caller: the request that filled the
        batch answers 503, and the redrive re-sends the jobs)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        jobs, self._jobs = self._jobs, []
        if jobs:
            self._dispatch.push([batch_message("memory.extract", jobs, self._queue)])

    def close(self) -> None:
        """Send what is waiting as the process ends; if Redis is not there, the redrive will."""
        self._flush_later()

    def _flush_later(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - their jobs are pending: the redrive sends them
            log.warning("could not send a batch of extractions; the redrive will", exc_info=True)
