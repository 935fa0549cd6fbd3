"""A worker process's life. Workers run one process each (Celery's solo pool: no parent holding a second
copy of the library; scale by starting more of them), so a worker that dies takes what it held with it:

- Its unacknowledged messages wait in hashes of its own (``memory.state.broker.node_keys``), and when it is
  started again under its name (the local stack's supervisor, a container's restart policy) it puts all of them
  back on their queues before it takes any work, at once instead of after the visibility timeout. What a node
  that never returns held goes back through ``memory.redrive`` once older than the visibility timeout
  (:func:`put_back_expired`). A node name must be unique while it runs, as Celery requires anyway.
- A worker busy with a batch does not read its socket, yet its pending BRPOP may already have taken a message
  from its queue: killed then, the message was in neither a queue nor its hash. So a worker that starts also
  re-sends the jobs accepted more than a second ago that no queue, worker or tenant's line holds, and looks again
  a second later (``memory.redrive``'s check, at once instead of after ``MNEME_REDRIVE_AFTER_S``:
  ``tasks.maintenance``). A job seen between two holders at that moment is sent twice, which the stages'
  idempotence makes harmless.
- A broker connection that drops (Redis killed, restarted, failed over) loses the channel the worker's held
  messages were delivered on: Celery cannot ack them any more ("Couldn't ack"), and kombu would put them back
  only after the visibility timeout (an hour). So when its consumer starts again after a connection loss
  (:class:`Reconnected`), a worker forgets the requests it had buffered for a batch and puts back everything
  its hash holds, before it consumes again; the stages' idempotence makes a message run twice harmless.
- The embed worker loads its model before it takes work (``MNEME_PRELOAD_EMBEDDER``), not the segmenter.
- Beat can run as a thread inside a worker (``MNEME_EMBEDDED_BEAT``): the local stack's pipeline worker does,
  one process fewer. Only one process of a deployment may run beat.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, bootsteps, signals
from celery.beat import EmbeddedService

from memory.errors import TransientError
from memory.mneme import get_mneme
from memory.state.broker import BEAT_S, UNACKED, node_keys
from tasks.batches import StageBatches

log = logging.getLogger(__name__)

_beat_service: list[Any] = []  # the beat thread this worker runs, if any
_put_back: list[int] = []  # how many messages of its previous run this worker put back (logged once it logs)


@signals.celeryd_init.connect
def _keys_of_its_own(sender: str | None = None, conf: Any = None, instance: Any = None, **_: object) -> None:
    if sender and conf is not None:
        conf.broker_transport_options = {**conf.broker_transport_options, **node_keys(sender)}
    if instance is not None:
        instance.app.steps["consumer"].add(Reconnected)


class Reconnected(bootsteps.StartStopStep):
    """The consumer's step that, each time it starts after the first (a broker connection lost and made again),
    puts back what this worker holds unacknowledged — nothing runs or is buffered on the new connection yet —
    and, while it runs, beats every ``BEAT_S`` from the consumer's own loop (``Broker.beat``): a worker that
    answers a ping but consumes nothing (its loop stuck, its connection gone) goes silent."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.starts = 0
        self.beating: Any = None

    def start(self, parent: Any) -> None:
        self.starts += 1
        if self.starts > 1:
            for task in parent.app.tasks.values():
                if isinstance(task, StageBatches):
                    task.forget_buffered()  # their messages are put back: they come again on this connection
            log.warning("broker connection back: put back %d messages held unacknowledged",
                        put_back(parent.app, parent.hostname))
        _beat(parent.hostname)
        self.beating = parent.timer.call_repeatedly(BEAT_S, _beat, (parent.hostname,))

    def stop(self, parent: Any) -> None:
        if self.beating is not None:
            self.beating.cancel()
            self.beating = None

    def shutdown(self, parent: Any) -> None:
        self.stop(parent)
        try:
            get_mneme().state.broker.left(parent.hostname)
        except TransientError:
            pass  # Redis down: its beat goes stale, as a dead worker's would


def _beat(node: str) -> None:
    try:
        get_mneme().state.broker.beat(node)
    except TransientError:
        pass  # Redis down: the consumer loses its connection too, and beats again once it is back


@signals.worker_init.connect
def _start(sender: Any = None, **_: object) -> None:
    mneme = get_mneme()
    node = sender.hostname
    mneme.state.broker.register(node)
    _put_back[:] = [put_back(sender.app, node)]
    if mneme.settings.preload_embedder:
        mneme.warm_up(recall=False)  # what needs the segmenter loads it on first use


@signals.worker_ready.connect
def _ready(sender: Any = None, **_: object) -> None:
    if _put_back and _put_back[0]:
        log.warning("put back %d messages this worker's previous run held unacknowledged", _put_back[0])
    settings = get_mneme().settings
    if settings.embedded_beat and sender is not None:
        service: Any = EmbeddedService(sender.app, thread=True,  # a Thread (typed as either kind)
                                       schedule_filename=str(settings.data_dir / "celerybeat-schedule"))
        service.start()
        _beat_service.append(service)


@signals.worker_shutdown.connect
def _stop_beat(**_: object) -> None:
    while _beat_service:
        _beat_service.pop().stop()


def put_back(app: Celery, node: str | None, older_than_s: float | None = None) -> int:
    """Put the messages ``node`` holds unacknowledged (``None``: kombu's shared hash) back on their queues, at
    the head: all of them, or those delivered more than ``older_than_s`` ago. kombu moves each in one
    transaction, so a message acknowledged meanwhile stays acknowledged."""
    options = node_keys(node) if node else {"unacked_key": UNACKED, "unacked_index_key": UNACKED + "_index",
                                            "unacked_mutex_key": UNACKED + "_mutex"}
    with app.connection_for_write(transport_options=options) as conn:
        channel: Any = conn.default_channel  # kombu's Redis channel: its client and QoS
        client = channel.client
        if older_than_s is None:
            tags = client.hkeys(options["unacked_key"])
        else:
            tags = client.zrangebyscore(options["unacked_index_key"], "-inf", time.time() - older_than_s)
        for tag in tags:
            channel.qos.restore_by_tag(tag, client)
        return len(tags)


def put_back_silent(app: Celery, silent_after_s: float) -> int:
    """What the worker nodes that stopped consuming (no beat for ``silent_after_s``) hold, back on its queues."""
    return sum(put_back(app, node) for node in get_mneme().state.broker.silent(silent_after_s))


def put_back_expired(app: Celery, visibility_timeout_s: float) -> int:
    """What any worker node (a departed one included) has held longer than the visibility timeout, back on
    its queue — as kombu does for a running worker's own."""
    return sum(put_back(app, node, visibility_timeout_s) for node in [None, *get_mneme().state.broker.nodes()])
