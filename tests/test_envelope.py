"""The extraction task message the API pushes inside its accept step (``tasks.envelope``, built by hand so the
push is part of one Redis step) against the installed Celery and kombu: the headers Celery itself would send
for the same call, decoded by kombu's Redis transport and run by Celery's worker request — so an upgrade of
either that changes the protocol fails here, not in production. Needs only a Valkey server."""

from __future__ import annotations

import json

import redis
from celery import Celery
from celery.worker.request import Request
from kombu import Queue

from tasks.envelope import task_message


def test_the_headers_are_the_ones_celery_sends_for_the_same_call():
    app = Celery("envelope-contract")
    theirs = app.amqp.as_task_v2("job-1", "memory.extract", args=(), kwargs={"job_id": "job-1"})
    _, raw = task_message("memory.extract", "job-1", {"job_id": "job-1"}, "extract")
    ours = json.loads(raw)
    missing = set(theirs.headers) - set(ours["headers"])
    assert not missing, f"Celery sends headers the envelope lacks: {sorted(missing)}"
    differ = {k: (ours["headers"][k], v) for k, v in theirs.headers.items()
              if k not in ("origin", "ignore_result") and ours["headers"][k] != v}
    assert not differ, differ  # origin names the process; Mneme's tasks ignore results
    assert json.loads(ours["body"]) == json.loads(json.dumps(theirs.body))  # [args, kwargs, embed]


def test_kombu_decodes_it_and_a_celery_worker_request_runs_it(valkey_url):
    broker_url = valkey_url
    app = Celery("envelope-contract", broker=broker_url)
    app.conf.update(task_serializer="json", accept_content=["json"], task_acks_late=True)
    ran: list[dict] = []

    @app.task(name="contract.extract")  # not memory.extract: the real task registers with every app (shared_task)
    def extract(**kwargs):  # the real task's signature: it takes the job id
        ran.append(kwargs)
        return "ran"

    queue, raw = task_message("contract.extract", "job-1", {"job_id": "job-1"}, "extract", request_id="req-1")
    with redis.Redis.from_url(broker_url) as client:
        client.lpush(queue, raw)
    with app.connection_for_read() as connection:
        message = Queue(queue, routing_key=queue).bind(connection.default_channel).get(no_ack=False)
        assert message is not None, "kombu found no message on the queue"
        assert (message.headers["task"], message.headers["id"]) == ("contract.extract", "job-1")
        assert message.headers["mneme_request_id"] == "req-1"
        assert message.decode() == [[], {"job_id": "job-1"}, {"callbacks": None, "errbacks": None, "chain": None,
                                                               "chord": None}]
        request = Request(message, app=app, task=app.tasks["contract.extract"])
        assert (request.id, request.name) == ("job-1", "contract.extract")
        request.execute()
        message.ack()  # as a worker does once a late-ack task ran: nothing is left for kombu to restore
    assert ran == [{"job_id": "job-1"}]
