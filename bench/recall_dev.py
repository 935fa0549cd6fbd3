"""Recall on the public dev sets of shared/dev-data (memdaily zh, realmem en, prefeval en, vehiclemembench en).

    python -m bench.recall_dev                  through the real API + workers (as `make bench-recall`)
    python -m bench.recall_dev --in-process     the same library calls without HTTP or Celery (for tuning)
        [--sets memdaily,realmem] [--full] [--k 10] [--variant NAME:MNEME_X=v,MNEME_Y=w ...]
        [--compare bench/results/saved.json]    Mneme against Mneme of a saved run, query by query

Per set (bench/devsets.py; sampled with --seed, --full for all): BM25 and a flat vector store over every
message (the same embedder as Mneme), both fused by reciprocal rank (k=60), Mneme with default settings and
each variant (its own ingest). R@1/5/10 sliced by category, language, gold position and query shape; a paired
bootstrap of R@10 (Mneme vs the run's best baseline, each variant vs Mneme); how often Mneme recalled nothing.
realmem counts only what came before each query: every system ranks the whole history, its ranking is cut to
the turns before the question, then to k (so each is asked for 100, 50 through the API). Writes figures and
per-query ranked ids, never dataset text, to bench/results/recall_dev[_in_process].json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from bench.devsets import SETS, DevSet, dev_data_root, load_sets
from bench.recall import KS
from bench.recall_long import (
    RESULTS,
    CachedEmbedder,
    Ranked,
    messages,
    mneme_in_process,
    mneme_stack,
    print_table,
    query_recall,
    run_bm25,
    run_flat,
    table,
)

RRF_K = 60
FILTERED_ASK = 100  # what each system is asked for where its ranking is cut to the turns before the query
API_MAX_K = 50  # /v1/recall's largest k
BASELINES = ("BM25", "flat vector", "BM25+flat RRF")
RESAMPLES = 2000


def fused(*runs: Ranked, k: int = RRF_K) -> Ranked:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the runs."""
    out = {}
    for qid in runs[0]:
        scores: dict[str, float] = {}
        for run in runs:
            for rank, mid in enumerate(run.get(qid, []), start=1):
                scores[mid] = scores.get(mid, 0.0) + 1.0 / (k + rank)
        out[qid] = sorted(scores, key=lambda m: -scores[m])
    return out


def before_only(ranked: Ranked, ds: DevSet, k: int) -> Ranked:
    """Each ranking cut to the messages before its query's ``before`` message (where it has one), then to k."""
    position = {(u["user_id"], m["message_id"]): i for u in ds.users for i, m in enumerate(messages(u))}
    out = {}
    for q in ds.queries:
        ids = ranked.get(q["query_id"], [])
        if "before" in q:
            limit = position[(q["user_id"], q["before"])]
            ids = [m for m in ids if position.get((q["user_id"], m), limit) < limit]
        out[q["query_id"]] = ids[:k]
    return out


def paired_bootstrap(a: list[float], b: list[float], resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """Mean of a - b over paired queries with a 95% interval from resampling the queries; the verdict is
    "better" / "worse" when the interval leaves out 0, else "within noise"."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not len(diff):
        return {"diff": 0.0, "low": 0.0, "high": 0.0, "verdict": "within noise", "n": 0}
    picks = np.random.default_rng(seed).integers(0, len(diff), size=(resamples, len(diff)))
    low, high = np.percentile(diff[picks].mean(axis=1), [2.5, 97.5])
    verdict = "better" if low > 0 else "worse" if high < 0 else "within noise"
    return {"diff": float(diff.mean()), "low": float(low), "high": float(high), "verdict": verdict, "n": len(diff)}


def variant(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME:MNEME_X=v,MNEME_Y=w`` → (name, env)."""
    name, _, settings = spec.partition(":")
    env = dict(pair.split("=", 1) for pair in settings.split(",") if pair)
    if not name or not env or not all(key.startswith("MNEME_") for key in env):
        raise argparse.ArgumentTypeError(f"{spec!r}: expected NAME:MNEME_X=v[,MNEME_Y=w]")
    if name in ("Mneme", *BASELINES):
        raise argparse.ArgumentTypeError(f"{spec!r}: {name!r} already names a system of the run")
    return name, env


def mneme(ds: DevSet, env: dict[str, str], k: int, embedder: CachedEmbedder | None) -> Ranked:
    """Mneme fed the set in a fresh store and asked for k events a query: in process with ``embedder``,
    else through a stack of API and workers."""
    with tempfile.TemporaryDirectory(prefix="mneme-dev-") as tmp:
        if embedder is not None:
            return mneme_in_process(ds.users, ds.queries, embedder, Path(tmp), env, k=k)
        return mneme_stack(ds.users, ds.queries, Path(tmp), k=k, env=env)[0]


def run_set(ds: DevSet, args: argparse.Namespace, embedder: CachedEmbedder) -> dict:
    """Every system on one set: scores, bootstrap, empty recalls, seconds and per-query ranked ids."""
    filtered = any("before" in q for q in ds.queries)
    ask = (FILTERED_ASK if args.in_process else API_MAX_K) if filtered else args.k
    seconds: dict[str, float] = {}
    raw: dict[str, Ranked] = {}

    def timed(name: str, run: Callable[[], Ranked]) -> None:
        started = time.perf_counter()
        raw[name] = run()
        seconds[name] = round(time.perf_counter() - started, 1)

    timed("BM25", lambda: run_bm25(ds.users, ds.queries, depth=ask))
    timed("flat vector", lambda: run_flat(ds.users, ds.queries, embedder.embed, depth=ask))
    raw["BM25+flat RRF"] = fused(raw["BM25"], raw["flat vector"])
    for name, env in [("Mneme", {}), *args.variant]:
        timed(name, partial(mneme, ds, env, ask, embedder if args.in_process else None))
    runs = {name: before_only(ranked, ds, args.k) for name, ranked in raw.items()}
    r10 = {name: [query_recall(runs[name][q["query_id"]], q, 10) for q in ds.queries] for name in runs}
    results = table(runs, ds.queries)
    best = max(BASELINES, key=lambda name: results[name]["all"]["R@10"])
    comparisons = {f"Mneme vs {best}": paired_bootstrap(r10["Mneme"], r10[best], seed=args.seed)}
    for name, _ in args.variant:
        comparisons[f"{name} vs Mneme"] = paired_bootstrap(r10[name], r10["Mneme"], seed=args.seed)
    if (before := _saved(args.compare, ds.name)) is not None:  # a code change: this run against a saved one
        kept = [i for i, q in enumerate(ds.queries) if q["query_id"] in before]
        comparisons[f"Mneme vs {args.compare.name}"] = paired_bootstrap(
            [r10["Mneme"][i] for i in kept], [before[ds.queries[i]["query_id"]] for i in kept], seed=args.seed)
    mnemes = ["Mneme", *(name for name, _ in args.variant)]
    return {"users": len(ds.users), "messages": sum(len(messages(u)) for u in ds.users), "queries": len(ds.queries),
            "metric": ds.metric, "asked_k": ask, "notes": ds.notes, "seconds": seconds, "results": results,
            "bootstrap_r10": comparisons,
            "empty_recalls": {name: sum(not raw[name][q["query_id"]] for q in ds.queries) for name in mnemes},
            "per_query": {q["query_id"]: {"gold": q["gold"], "ranked": {n: runs[n][q["query_id"]] for n in runs},
                                          "R@10": {n: r10[n][i] for n in runs}}
                          for i, q in enumerate(ds.queries)}}


def _saved(path: Path | None, set_name: str) -> dict[str, float] | None:
    """Mneme's R@10 per query in a run saved at ``path`` (None: no comparison asked, or the set not in it)."""
    if path is None:
        return None
    saved = json.loads(path.read_text()).get("sets", {}).get(set_name)
    return None if saved is None else {qid: q["R@10"]["Mneme"] for qid, q in saved["per_query"].items()}


def report(name: str, out: dict) -> None:
    metric = "hit@k: a query counts 1 when any of its gold messages is in the top k" if out["metric"] == "hit" \
        else "recall@k: the share of a query's gold messages in the top k"
    print(f"\n=== {name}: {out['users']} users, {out['messages']:,} messages, {out['queries']} queries; {metric}")
    for what, n in out["notes"].items():
        print(f"  {what}: {n}")
    print_table(out["results"], "R@10")
    for system, r in out["results"].items():
        print(f"  {system:20}" + "  ".join(f"R@{k} {r['all'][f'R@{k}']:.3f}" for k in KS))
    for label, b in out["bootstrap_r10"].items():
        print(f"  R@10 {label}: {b['diff']:+.3f} [{b['low']:+.3f}, {b['high']:+.3f}] n={b['n']}: {b['verdict']}")
    print("  empty recalls: " + ", ".join(f"{n} {c}/{out['queries']}" for n, c in out["empty_recalls"].items()))
    print("  seconds: " + ", ".join(f"{n} {s}" for n, s in out["seconds"].items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-process", action="store_true", help="library calls, no HTTP or Celery (tuning)")
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--full", action="store_true", help="every item of each set, not the seeded sample")
    parser.add_argument("--variant", type=variant, action="append", default=[],
                        help="NAME:MNEME_X=v,MNEME_Y=w: Mneme again with these settings (repeatable)")
    parser.add_argument("--k", type=int, default=10, help="results kept per query (R@k for k up to this)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="a saved run's JSON: Mneme of this run against Mneme of that "
                                                     "one, query by query (to keep or drop a code change)")
    parser.add_argument("--embedder", default="use://multilingual-v3",
                        help="MNEME_EMBEDDER_URL of the model every system embeds with (in process: flat and Mneme)")
    parser.add_argument("--out", type=Path, help="where to write the JSON (default bench/results/recall_dev[...].json)")
    args = parser.parse_args(argv)
    from memory.registry import open_backend
    from memory.settings import Settings

    model = open_backend("embedder", args.embedder, Settings(embedder_url=args.embedder))
    # a cache a model: named by its scheme and target, or a server's by the model it serves (not its port)
    named = args.embedder.split("model=", 1)[1].split("&")[0] if "model=" in args.embedder else args.embedder
    cache = "".join(c if c.isalnum() or c == "." else "-" for c in named.replace("://", "-"))
    embedder = CachedEmbedder(model, RESULTS / ".cache" / f"{cache}.npz")
    now, started = time.time(), time.perf_counter()
    sets: dict = {}
    for ds in load_sets(dev_data_root(), [s for s in args.sets.split(",") if s], now, args.full, args.seed):
        t0 = time.perf_counter()
        sets[ds.name] = run_set(ds, args, embedder)
        sets[ds.name]["seconds"]["set"] = round(time.perf_counter() - t0, 1)
        report(ds.name, sets[ds.name])
    out = {"in_process": args.in_process, "full": args.full, "seed": args.seed, "k": args.k,
           "variants": dict(args.variant), "seconds": round(time.perf_counter() - started, 1), "sets": sets}
    RESULTS.mkdir(exist_ok=True)
    path = args.out or RESULTS / ("recall_dev_in_process.json" if args.in_process else "recall_dev.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print(f"\nwrote {path} ({out['seconds']} s)")


if __name__ == "__main__":
    main()
