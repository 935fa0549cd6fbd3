"""Task messages onto the Celery broker's lists, after the state step that decided them.

The broker is kombu's Redis transport, which speaks to one server: beside a Redis Cluster holding the state
it is a Redis of its own (``MNEME_BROKER_URL``), so no Lua step can push a task in the step that decides it.
A step records what it decided (a job pending, a job declared, a rollback's retraction, audit records held);
its caller then pushes the tasks here. What a crash between the two leaves undone is found by what the step
recorded: a redelivered task (acks_late) pushes again, and ``memory.redrive`` re-sends pending jobs, held
audit records and unfinished retractions.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis


class Dispatch:
    def __init__(self, broker: redis.Redis) -> None:
        self._broker = broker

    def push(self, sends: Sequence[tuple[str, str]]) -> None:
        """LPUSH each (broker list, task message), in one round trip."""
        if not sends:
            return
        pipe = self._broker.pipeline(transaction=False)
        for queue, message in sends:
            pipe.lpush(queue, message)
        pipe.execute()
