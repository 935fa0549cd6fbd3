"""Memory: Redis's for 1,000 sessions × 50 messages with their finished jobs' records (``memory``), and the
RSS of every process of the default stack against Redis plus one process holding the model (``footprint``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import redis

from bench.load import (
    TENANT,
    corpus,
    enqueue_all,
    wait_finished,
)
from bench.working import raw_records
from memory import ids
from memory.mneme import Mneme
from memory.models import Message, Role
from memory.settings import Settings
from memory.state import keys
from memory.state.jobs import Declaration, JobWork
from memory.text import clean
from workers.local.stack import Stack, free_port


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
            _, record, _, _ = raw_records(f"s{s:04d}", j, role, clean(text))
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
