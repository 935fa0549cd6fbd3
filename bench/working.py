"""Working memory: appends and the window read back, p50/p99 against raw redis-py doing the same job in the
same number of round trips; appends/s from several client processes; the same on a local 3-master Valkey Cluster
(``working`` and ``cluster`` of ``bench.bench``)."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import redis

from bench.load import (
    TENANT,
    corpus,
    embedded_redis,
    pct,
)
from memory import ids
from memory.mneme import Mneme
from memory.models import Role
from memory.settings import Settings
from memory.text import clean

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


def raw_records(session: str, i: int, role: str, text: str) -> tuple[str, str, str, float]:
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
        job_id, record, payload, now = raw_records(session, i, role, text)
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
            job_id, record, payload, now = raw_records(session, i, role, text)
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
