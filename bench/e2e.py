"""End to end: messages/s from POST /v1/messages until every job is done, against the raw embedder on the same
texts and a raw pipeline that only embeds them (``bench.raw_pipeline``); the pipeline alone (a drained backlog),
32 messages a POST, the pipeline alone for users past the event layer's cap (the bench's other users are new
ones), light traffic (messages one at a time on the idle stack: how long until each is done, against the raw
embedder on one sentence), and end to end again for conversations whose answers are at a chat model's length
(``long_answers``), against the raw embedder on those texts; and those conversations sent turn by turn on two
embed workers, against the same without the turns' vectors kept in working memory (``e2e`` of
``bench.bench``)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import threading
import time

import httpx

from bench.load import (
    as_embedded,
    busy_seconds,
    corpus,
    cpu_ms_each,
    cpu_seconds,
    embedded_texts,
    enqueue_all,
    long_answers,
    message_body,
    send_all,
    wait_finished,
)
from bench.raw_pipeline import bench_raw_pipeline
from memory.embedding import Embedder
from memory.mneme import Mneme
from workers.local.stack import Stack


def bench_e2e(stack: Stack, n: int) -> dict:
    texts = corpus()
    ts = time.time() - 86400

    def unique(i: int) -> tuple[str, str]:  # every message a text of its own: no vector is remembered across them
        role, text = texts[i % len(texts)]
        return role, f"{text} #{i}"

    bodies = [message_body(i, unique(i)[1], unique(i)[0], 40, 25, ts + i) for i in range(n)]
    main = _end_to_end(stack, bodies)
    probe = httpx.post(stack.api_url + "/v1/recall", json={"user_id": "u1", "query": bodies[1]["content"]},
                       timeout=30).json()
    # the raw embedder alone: the same texts, the same thread count and batch size as the embed worker
    from memory.embedding import USEEmbedder

    embedder = USEEmbedder(threads=1)
    raw_rate = _raw_rate(embedder, [b["content"] for b in bodies], stack.settings.embed_batch_size)
    raw_pipeline = bench_raw_pipeline(stack, bodies, stack.settings.embed_batch_size)  # the same texts
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
    first = 20 * n + fed  # texts no run before used
    steady = _steady(stack, [message_body(k, unique(k)[1], unique(k)[0], 40, 25, ts + k)
                             for k in range(first, first + STEADY_RATE * STEADY_S)], STEADY_RATE)
    raw_one = []
    for text in fresh:  # the raw embedder on one sentence at a time, as a message alone is embedded
        t = time.perf_counter()
        embedder.embed([as_embedded(text)])
        raw_one.append(time.perf_counter() - t)
    flush_intervals = (stack.settings.extract_flush_interval_s + stack.settings.embed_flush_interval_s
                       + stack.settings.graph_flush_interval_s)  # what a message alone waits for, at most
    answers = long_answers()  # an agent's conversations: its answers at a chat model's length

    def answered(i: int) -> dict:  # a text of its own, as ``unique``'s
        role, text = answers[i % len(answers)]
        return message_body(i, f"{text} #{i}", role, 40, 25, ts + i)

    long_bodies = [answered(10 * n + fed + i) for i in range(n)]
    long = _end_to_end(stack, long_bodies)
    long_raw = _raw_rate(embedder, [b["content"] for b in long_bodies], stack.settings.embed_batch_size)
    two_workers = _two_embed_workers(stack, answers)
    return {
        "raw_pipeline": raw_pipeline | {"ratio": raw_pipeline["messages_per_s"] / raw_rate},
        "pipeline_alone": drained | {"ratio": drained["messages_per_s"] / raw_rate},
        "batched": batched | {"ratio": batched["messages_per_s"] / raw_rate},
        "past_the_cap": past_cap | {"ratio": past_cap["messages_per_s"] / raw_rate, "users": LONG_TERM_USERS,
                                    "fed_first": fed},
        "one_at_a_time": one_by_one | {
            "raw_embed_one_p50_s": statistics.median(raw_one),
            "flush_intervals_s": flush_intervals},
        "steady": steady | {"flush_intervals_s": flush_intervals},
        "long_answers": {
            "messages": n, "messages_per_s": long["messages_per_s"], "raw_embedder_sentences_per_s": long_raw,
            "ratio": long["messages_per_s"] / long_raw, "failed_jobs": long["failed_jobs"],
            "chars_per_text": statistics.mean(len(as_embedded(b["content"])) for b in long_bodies),
            "cpu_ms_per_message": long["cpu_ms_per_message"],
            "cpu_ms_per_message_by_process": {name: round(seconds / n * 1000, 2)
                                              for name, seconds in long["cpu_seconds_per_process"].items()}},
        "two_embed_workers": two_workers,
        "messages": n, "enqueue_seconds": main["enqueue_seconds"], "all_done_seconds": main["all_done_seconds"],
        "mneme_messages_per_s": main["messages_per_s"], "raw_embedder_sentences_per_s": raw_rate,
        "ratio": main["messages_per_s"] / raw_rate, "failed_jobs": main["failed_jobs"],
        "recall_probe_events": len(probe.get("events", [])),
        "cpu_seconds_per_process": main["cpu_seconds_per_process"], "cpu_ms_per_message": main["cpu_ms_per_message"],
        "client_cpu_ms_per_message": main["client_cpu_ms_per_message"],  # this process: it sends, then polls
        "cpus_busy_posting": main["cpus_busy_posting"], "cpus_busy_after": main["cpus_busy_after"],
    }


def _end_to_end(stack: Stack, bodies: list[dict]) -> dict:
    """Every body POSTed on 16 keep-alive connections, then every job watched until done: messages/s from
    the first POST until the last job is done, the CPU each stack process and this one spent, and how many of
    the machine's CPUs were busy while the POSTs went and after them (the backlog they left)."""
    cpu_before, client_before, busy_before = cpu_seconds(stack), sum(os.times()[:2]), busy_seconds()
    started = time.perf_counter()
    job_ids = asyncio.run(enqueue_all(stack.api_port, bodies, 16))
    enqueued, busy_posting = time.perf_counter() - started, busy_seconds()
    states = wait_finished(Mneme(stack.settings).state.jobs, job_ids, started, 0.1)
    elapsed, busy_after = time.perf_counter() - started, busy_seconds()
    cpu_after, client_cpu = cpu_seconds(stack), sum(os.times()[:2]) - client_before
    spent = {k: round(cpu_after.get(k, 0) - v, 2) for k, v in cpu_before.items()}
    return {"messages_per_s": len(bodies) / elapsed, "enqueue_seconds": enqueued, "all_done_seconds": elapsed,
            "failed_jobs": sum(s == "failed" for s in states.values()), "cpu_seconds_per_process": spent,
            "cpu_ms_per_message": round(sum(spent.values()) / len(bodies) * 1000, 2),
            "client_cpu_ms_per_message": round(client_cpu / len(bodies) * 1000, 2),
            "cpus_busy_posting": round((busy_posting - busy_before) / enqueued, 2),
            "cpus_busy_after": round((busy_after - busy_posting) / max(elapsed - enqueued, 1e-3), 2)}


def _raw_rate(embedder: Embedder, texts: list[str], batch: int) -> float:
    """The raw embedder's sentences/s on the texts as the embed stage embeds them, in its batches; the better
    of two runs (the baseline is not penalised by a noisy moment)."""
    cleaned = [as_embedded(text) for text in texts]
    embedder.embed(cleaned[:batch])
    rates = []
    for _ in range(2):
        t = time.perf_counter()
        for i in range(0, len(cleaned), batch):
            embedder.embed(cleaned[i:i + batch])
        rates.append(len(cleaned) / (time.perf_counter() - t))
    return max(rates)


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


STEADY_RATE, STEADY_S = 150, 8  # steady traffic: messages a second, for this long


def _steady(stack: Stack, bodies: list[dict], rate: float) -> dict:
    """Steady traffic: the messages POSTed at ``rate`` a second (message i due at i / rate, on one keep-alive
    connection), each job's state asked every 10 ms from another thread until it is done: seconds from the
    POST until done, p50, p95 and the slowest. What a batch of the stages waits for in real traffic — the
    light-traffic rows send one message at a time, a backlog never waits. A job not done within 600 s fails
    the bench."""
    jobs, posted, finished = Mneme(stack.settings).state.jobs, {}, {}
    sending, deadline = threading.Event(), time.perf_counter() + 600

    def watch() -> None:
        while (sending.is_set() or len(finished) < len(posted)) and time.perf_counter() < deadline:
            pending = [j for j in list(posted) if j not in finished]
            now = time.perf_counter()
            finished.update({j: now for j, state in jobs.states(pending).items() if state in ("done", "failed")})
            time.sleep(0.01)

    sending.set()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with httpx.Client(base_url=stack.api_url, timeout=30) as http:
            started = time.perf_counter()
            for i, body in enumerate(bodies):
                time.sleep(max(0.0, started + i / rate - time.perf_counter()))
                job_id = http.post("/v1/messages", json=body).raise_for_status().json()["job_id"]
                posted[job_id] = time.perf_counter()
    finally:
        sending.clear()
        watcher.join(600)
    if missing := len(set(posted) - set(finished)):
        raise RuntimeError(f"steady traffic: {missing} jobs not done within 600 s")
    took = sorted(finished[j] - posted[j] for j in posted)
    return {"messages": len(bodies), "rate": rate, "p50_s": statistics.median(took),
            "p95_s": took[int(0.95 * (len(took) - 1))], "max_s": took[-1]}


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


TURNS, SESSIONS = 10, 40  # the conversations sent turn by turn to two embed workers


def _two_embed_workers(stack: Stack, answers: list[tuple[str, str]]) -> dict:
    """Conversations sent turn by turn — every session's next turn once all their turns before are done, as
    agents talk — with an agent's answers, to two embed workers: the texts the model embedded and the embed
    workers' CPU, a message. Then the same with the workers started again keeping no turn's vector in working
    memory (``MNEME_CONTEXT_VECTOR_TTL_S=0``), the baseline: a turn the other worker embedded is embedded again
    as its reply's context."""
    said = {role: [text for r, text in answers if r == role] for role in ("user", "assistant")}

    def run(mark: str) -> dict:
        before, cpu_before = embedded_texts(stack.api_url).get("model", 0.0), cpu_seconds(stack)
        for turn in range(TURNS):
            role = "user" if turn % 2 == 0 else "assistant"
            bodies = [{"user_id": f"w{mark}{k}", "session_id": f"w{mark}{k}", "message_id": f"m{turn}", "role": role,
                       "content": f"{said[role][(k * TURNS + turn) % len(said[role])]} #{mark}{k}-{turn}",
                       "client_ts": 1_700_000_000 + turn} for k in range(SESSIONS)]
            started = time.perf_counter()
            wait_finished(Mneme(stack.settings).state.jobs, asyncio.run(enqueue_all(stack.api_port, bodies, 8)),
                          started, 0.02)
        cpu = cpu_ms_each(cpu_before, cpu_seconds(stack), TURNS * SESSIONS)
        model = embedded_texts(stack.api_url).get("model", 0.0)
        return {"model_texts_per_message": (model - before) / (TURNS * SESSIONS),
                "embed_workers_cpu_ms_per_message": round(sum(v for k, v in cpu.items() if "embed" in k), 2)}

    def start(ttl: str | None, workers: int) -> None:  # the embed workers, keeping turns' vectors for ttl
        for name in ("worker-embed", "worker-embed-2"):
            stack.stop_one(name)
        stack.env.pop("MNEME_CONTEXT_VECTOR_TTL_S", None)
        stack.env |= {"MNEME_CONTEXT_VECTOR_TTL_S": ttl} if ttl is not None else {}
        stack.start_one("worker-embed")
        if workers == 2:
            stack.start_another("worker-embed", "worker-embed-2", "embed-2")
        stack.wait_ready(wait_embedder=False)

    ttl = stack.env.get("MNEME_CONTEXT_VECTOR_TTL_S")  # None: the default
    try:
        start(ttl, 2)
        kept = run("k")
        start("0", 2)
        not_kept = run("n")
    finally:
        start(ttl, 1)  # the stack as it was
    return {"sessions": SESSIONS, "turns": TURNS, "kept": kept, "not_kept": not_kept}

