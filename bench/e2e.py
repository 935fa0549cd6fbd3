"""End to end: messages/s from POST /v1/messages until every job is done, against the raw embedder on the same
texts; the pipeline alone (a drained backlog), 32 messages a POST, the pipeline alone for users past the event
layer's cap (the bench's other users are new ones), and light traffic (messages one at a time on the idle stack:
how long until each is done, against the raw embedder on one sentence) beside it (``e2e`` of ``bench.bench``)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time

import httpx

from bench.load import (
    corpus,
    cpu_ms_each,
    cpu_seconds,
    enqueue_all,
    message_body,
    send_all,
    wait_finished,
)
from memory.mneme import Mneme
from memory.text import clean
from workers.local.stack import Stack


def bench_e2e(stack: Stack, n: int) -> dict:
    texts = corpus()
    ts = time.time() - 86400

    def unique(i: int) -> tuple[str, str]:  # every message a text of its own: no vector is remembered across them
        role, text = texts[i % len(texts)]
        return role, f"{text} #{i}"

    bodies = [message_body(i, unique(i)[1], unique(i)[0], 40, 25, ts + i) for i in range(n)]
    cpu_before, client_before = cpu_seconds(stack), sum(os.times()[:2])
    started = time.perf_counter()
    job_ids = asyncio.run(enqueue_all(stack.api_port, bodies, 16))
    enqueued = time.perf_counter() - started
    states = wait_finished(Mneme(stack.settings).state.jobs, job_ids, started, 0.1)
    elapsed = time.perf_counter() - started
    cpu_after, client_cpu = cpu_seconds(stack), sum(os.times()[:2]) - client_before
    probe = httpx.post(stack.api_url + "/v1/recall", json={"user_id": "u1", "query": bodies[1]["content"]},
                       timeout=30).json()
    # the raw embedder alone: the same texts, the same thread count and batch size as the embed worker
    from memory.embedding import USEEmbedder

    embedder = USEEmbedder(threads=1)
    cleaned = [clean(b["content"]) for b in bodies]
    embedder.embed(cleaned[:32])
    batch = stack.settings.embed_batch_size
    raw_rates = []
    for _ in range(2):  # the better of two runs: the baseline is not penalised by a noisy moment
        t = time.perf_counter()
        for i in range(0, len(cleaned), batch):
            embedder.embed(cleaned[i:i + batch])
        raw_rates.append(len(cleaned) / (time.perf_counter() - t))
    raw_rate = max(raw_rates)
    drained = _drain(stack, [message_body(n + i, unique(n + i)[1], unique(n + i)[0], 40, 25, ts + n + i)
                             for i in range(n)])
    batched = _batched(stack, [message_body(2 * n + i, unique(2 * n + i)[1], unique(2 * n + i)[0], 40, 25,
                                             ts + 2 * n + i) for i in range(n)], BATCHED)

    def long_term(i: int) -> dict:  # users of their own, past the cap once the first messages are through
        body = message_body(i, unique(i)[1], unique(i)[0], LONG_TERM_USERS, 25, ts + i)
        return body | {"user_id": "long-" + body["user_id"], "session_id": "long-" + body["session_id"]}

    fed = LONG_TERM_USERS * (stack.settings.events_cap + 30)  # each user's layer full, then over the cap
    _drain(stack, [long_term(3 * n + i) for i in range(fed)])
    past_cap = _drain(stack, [long_term(3 * n + fed + i) for i in range(n)])
    fresh = [unique(4 * n + fed + i)[1] for i in range(ONE_AT_A_TIME)]  # texts no worker has embedded yet
    one_by_one = _one_at_a_time(stack, [{"user_id": "light", "session_id": "light-s", "message_id": f"light-{i}",
                                         "role": "user", "content": text, "client_ts": time.time()}
                                        for i, text in enumerate(fresh)])
    raw_one = []
    for text in fresh:  # the raw embedder on one sentence at a time, as a message alone is embedded
        t = time.perf_counter()
        embedder.embed([clean(text)])
        raw_one.append(time.perf_counter() - t)
    return {
        "pipeline_alone": drained | {"ratio": drained["messages_per_s"] / raw_rate},
        "batched": batched | {"ratio": batched["messages_per_s"] / raw_rate},
        "past_the_cap": past_cap | {"ratio": past_cap["messages_per_s"] / raw_rate, "users": LONG_TERM_USERS,
                                    "fed_first": fed},
        "one_at_a_time": one_by_one | {
            "raw_embed_one_p50_s": statistics.median(raw_one),
            "flush_intervals_s": stack.settings.extract_flush_interval_s + stack.settings.embed_flush_interval_s
            + stack.settings.graph_flush_interval_s},
        "messages": n, "enqueue_seconds": enqueued, "all_done_seconds": elapsed,
        "mneme_messages_per_s": n / elapsed, "raw_embedder_sentences_per_s": raw_rate,
        "ratio": n / elapsed / raw_rate, "failed_jobs": sum(s == "failed" for s in states.values()),
        "recall_probe_events": len(probe.get("events", [])),
        "cpu_seconds_per_process": {k: round(cpu_after.get(k, 0) - v, 2) for k, v in cpu_before.items()},
        "cpu_ms_per_message": round(sum(cpu_after.get(k, 0) - v for k, v in cpu_before.items()) / n * 1000, 2),
        "client_cpu_ms_per_message": round(client_cpu / n * 1000, 2),  # this process: it sends, then polls
    }


BATCHED = 32  # messages a POST /v1/messages/batch in the batched end to end
LONG_TERM_USERS = 16  # users fed past the event layer's cap before their drain is measured (a long-term user is)
ONE_AT_A_TIME = 20  # light traffic: messages sent each once the one before is done


def _one_at_a_time(stack: Stack, bodies: list[dict]) -> dict:
    """Light traffic: each message POSTed once the one before it is done, on the idle stack; seconds from the
    POST until its job is done (asked every 5 ms), p50 and the slowest."""
    jobs, took = Mneme(stack.settings).state.jobs, []
    with httpx.Client(base_url=stack.api_url, timeout=30) as http:
        for body in bodies:
            started = time.perf_counter()
            job_id = http.post("/v1/messages", json=body).raise_for_status().json()["job_id"]
            wait_finished(jobs, [job_id], started, 0.005)
            took.append(time.perf_counter() - started)
    return {"messages": len(bodies), "p50_s": statistics.median(took), "max_s": max(took)}


def _batched(stack: Stack, bodies: list[dict], per: int) -> dict:
    """End to end again, the messages sent ``per`` a request (POST /v1/messages/batch, 8 connections): the
    messages/s until every job is done, and the API's CPU per message."""
    groups = [bodies[i:i + per] for i in range(0, len(bodies), per)]
    cpu_before, started = cpu_seconds(stack), time.perf_counter()
    answers = asyncio.run(send_all(stack.api_port, "/v1/messages/batch",
                                   [json.dumps({"messages": g}).encode() for g in groups], 8,
                                   lambda body: [a["job_id"] for a in body["accepted"]]))
    job_ids = [job_id for jobs in answers for job_id in jobs]
    wait_finished(Mneme(stack.settings).state.jobs, job_ids, started, 0.1)
    seconds, cpu_after = time.perf_counter() - started, cpu_seconds(stack)
    return {"messages": len(bodies), "per_request": per, "messages_per_s": len(bodies) / seconds,
            "cpu_ms_per_message_by_process": cpu_ms_each(cpu_before, cpu_after, len(bodies))}


def _drain(stack: Stack, bodies: list[dict]) -> dict:
    """The pipeline alone: the workers stop consuming (running, their models loaded), the messages are
    accepted, then the workers take the backlog; the time from then until every job is done."""
    from workers.celery_app import QUEUES, create_celery

    app = create_celery(stack.settings, with_tasks=False)
    nodes = [name for reply in app.control.ping(timeout=2) for name in reply]
    consumes = {queue: [n for n in nodes if ("embed@" in n) == (queue == "embed")] for queue in QUEUES}
    for queue, where in consumes.items():
        app.control.cancel_consumer(queue, reply=True, timeout=5, destination=where)
    job_ids = asyncio.run(enqueue_all(stack.api_port, bodies, 16))
    jobs, cpu_before = Mneme(stack.settings).state.jobs, cpu_seconds(stack)
    started = time.perf_counter()
    for queue, where in consumes.items():
        app.control.add_consumer(queue, reply=True, timeout=5, destination=where)
    wait_finished(jobs, job_ids, started, 0.05)
    seconds, cpu_after = time.perf_counter() - started, cpu_seconds(stack)
    app.close()
    return {"messages": len(bodies), "seconds": seconds, "messages_per_s": len(bodies) / seconds,
            "cpu_ms_per_message_by_process": cpu_ms_each(cpu_before, cpu_after, len(bodies))}
