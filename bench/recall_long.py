"""Recall on long histories (bench/longmem: generated, validated, ≥10 users × ≥500 messages, zh / en / mixed).

    python -m bench.recall_long                 (or `make bench-recall`): through the real API + workers
    python -m bench.recall_long --in-process    the same library calls without HTTP or Celery (for tuning)
    python -m bench.recall_long --per-session-ids   Mneme fed ids numbered per session (m1, m2, … in each)
    python -m bench.recall_long --long-answers  each assistant answer at a chat model's length

Each query asks, after the whole history, about a specific said in it; a system returns ranked message
ids; recall@k is the share of the query's gold messages among the first k ids. Baselines, run here on the
same data in the same run: BM25 over every message of the user, and a flat vector store over every message
(the same embedder as Mneme). Figures per category, shape, language and fact position; then the history
length sweep: recall of questions about a user's first sessions as the history grows to 100, 200, 500 and
1,000 messages. Prints tables and writes bench/results/recall_long.json.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from bench.load import at_agent_length
from bench.recall import BM25, KS, recall_at
from memory.text import clean, tokenize

RESULTS = Path(__file__).parent / "results"
SWEEP = (100, 200, 500, 1000)
DAY = 86400.0

Ranked = dict[str, list[str]]  # query id → ranked message ids
Named = Callable[[str, str], str]  # (session id, message id as fed) → the data's message id


def as_fed(session_id: str, message_id: str) -> str:
    return message_id


def per_session_ids(users: list[dict]) -> tuple[list[dict], Named]:
    """The users with their messages numbered per session, m1, m2, … in each, as many clients number them
    (the data's ids are unique per user), and the way back to the data's ids. A hit names its session once:
    a message merged into it from another session is looked up in the hit's (a miss if it is not there)."""
    back: dict[tuple[str, str], str] = {}
    out = []
    for user in users:
        sessions = []
        for session in user["sessions"]:
            msgs = []
            for j, m in enumerate(session["messages"], start=1):
                back[(session["session_id"], f"m{j}")] = m["message_id"]
                msgs.append({**m, "message_id": f"m{j}"})
            sessions.append({**session, "messages": msgs})
        out.append({**user, "sessions": sessions})
    return out, lambda session_id, message_id: back.get((session_id, message_id), message_id)


def ranked_ids(events: Iterable, named: Named) -> list[str]:
    """The message ids a recall's events name, in order, once each, as the data names them."""
    ranked: list[str] = []
    for event in events:
        ranked += [m for m in (named(event.session_id, i) for i in event.message_ids) if m not in ranked]
    return ranked


# --- data ---------------------------------------------------------------------------------------------

def load(seed: int = 7, short: bool = False) -> tuple[list[dict], list[dict]]:
    """The generated long histories, or (``short``) the hand-written set of bench/data (its test split)."""
    if short:
        from bench.recall import load as load_short

        users, queries = load_short()
        return users, [{**q, "category": q["kind"]} for q in queries if q["split"] == "test"]
    from bench.longmem.generate import generate

    return generate(seed=seed)


def with_long_answers(users: list[dict], seed: int = 3) -> list[dict]:
    """The users with each assistant answer ``at_agent_length``, among the same user's other answers."""
    rng, out = random.Random(seed), []
    for user in users:
        answers = [m["content"] for s in user["sessions"] for m in s["messages"] if m["role"] == "assistant"]
        sessions = [{**s, "messages": [{**m, "content": at_agent_length(m["content"], answers, rng)}
                                       if m["role"] == "assistant" else m for m in s["messages"]]}
                    for s in user["sessions"]]
        out.append({**user, "sessions": sessions})
    return out


def messages(user: dict) -> list[dict]:
    """The user's messages in time order, each with its session, device and client_ts (unix seconds): the
    message's own ``client_ts`` where the data gives one, else its session's ``days_ago`` and 45 s a turn."""
    out = []
    for session in sorted(user["sessions"], key=session_start):
        for i, m in enumerate(session["messages"]):
            out.append({**m, "session_id": session["session_id"], "device_id": session["device_id"],
                        "client_ts": m.get("client_ts", session_start(session) + i * 45)})
    return out


def session_start(session: dict) -> float:
    """When the session began: its first message's ``client_ts``, else ``days_ago`` before NOW."""
    first = session["messages"][0] if session["messages"] else {}
    return float(first["client_ts"]) if "client_ts" in first else NOW - session["days_ago"] * DAY


NOW = time.time()


def truncated(user: dict, limit: int) -> dict:
    """The user with only their first ``limit`` messages (whole sessions cut where the limit falls)."""
    kept, left = [], limit
    for session in sorted(user["sessions"], key=lambda s: -s["days_ago"]):
        if left <= 0:
            break
        kept.append({**session, "messages": session["messages"][:left]})
        left -= len(kept[-1]["messages"])
    return {**user, "sessions": kept}


# --- scoring ------------------------------------------------------------------------------------------

def query_recall(ranked: list[str], query: dict, k: int) -> float:
    """recall@k of one query: the share of its gold among the first k ids, or (``any_gold``) 1 if any is."""
    if query.get("any_gold"):
        return float(bool(set(ranked[:k]) & set(query["gold"])))
    return recall_at(ranked, query["gold"], k)


def score(ranked: Ranked, queries: Iterable[dict]) -> dict[str, float]:
    queries = list(queries)
    if not queries:
        return {}
    return {f"R@{k}": float(np.mean([query_recall(ranked.get(q["query_id"], []), q, k) for q in queries]))
            for k in KS} | {"n": len(queries)}


def slices(queries: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for q in queries:
        out["all"].append(q)
        for field in ("category", "shape", "fact_position", "fact_role", "gold_position"):
            if q.get(field):
                out[f"{field}={q[field]}"].append(q)
        out[f"user_lang={q['user_lang']}"].append(q)
        out[f"query_lang={q['lang']}"].append(q)
    return dict(sorted(out.items()))


# --- baselines ----------------------------------------------------------------------------------------

def run_bm25(users: list[dict], queries: list[dict], depth: int = 50) -> Ranked:
    index = {}
    for user in users:
        msgs = messages(user)
        index[user["user_id"]] = (BM25([tokenize(clean(m["content"])) for m in msgs]), [m["message_id"] for m in msgs])
    out = {}
    for q in queries:
        bm25, ids = index[q["user_id"]]
        s = bm25.scores(tokenize(q["query"]))
        out[q["query_id"]] = [ids[i] for i in np.argsort(-s, kind="stable")[:depth] if s[i] > 0]
    return out


def run_flat(users: list[dict], queries: list[dict], embed: Callable[[list[str]], np.ndarray],
             depth: int = 50) -> Ranked:
    by_user = {}
    for user in users:
        msgs = messages(user)
        by_user[user["user_id"]] = (embed([m["content"] for m in msgs]), [m["message_id"] for m in msgs])
    qv = embed([q["query"] for q in queries])
    out = {}
    for q, v in zip(queries, qv, strict=True):
        matrix, ids = by_user[q["user_id"]]
        out[q["query_id"]] = [ids[i] for i in np.argsort(-(matrix @ v))[:depth]]
    return out


class CachedEmbedder:
    """The embedder with a disk cache of vectors by text, so repeated runs embed each text once."""

    def __init__(self, embedder, cache: Path) -> None:
        self.embedder, self.cache = embedder, cache
        self.name, self.dim = embedder.name, embedder.dim
        self._memo: dict[str, np.ndarray] = {}
        if cache.exists():
            data = np.load(cache)
            self._memo = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._memo))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            for start in range(0, len(missing), 256):
                chunk = missing[start:start + 256]
                for k, v in zip(chunk, self.embedder.embed([text_of[k] for k in chunk]), strict=True):
                    self._memo[k] = v
            self.save()
        return np.stack([self._memo[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(self.cache, keys=np.array(list(self._memo)), vectors=np.stack(list(self._memo.values())))


# --- Mneme in process ---------------------------------------------------------------------------------

def mneme_in_process(users: list[dict], queries: list[dict], embedder, data_dir: Path, env: dict,
                     named: Named = as_fed, k: int = 10) -> Ranked:
    """Feed every message through the same library stages the workers run (rules → embed → episodic
    store), then ask ``memory.recall`` for ``k`` events at each query's ``now`` (unix seconds; else
    ``asked_at_days_ago`` before NOW): no HTTP, no Celery, for fast tuning."""
    from memory.embedding import embed_in_context
    from memory.extraction import extract
    from memory.mneme import Mneme
    from memory.models import Message, Role
    from memory.pipeline import EMBED_MAX_CHARS
    from memory.recall import recall
    from workers.local.stack import Stack

    stack = Stack(data_dir, beat=False, flower=False, env={"MNEME_REDIS_URL": "", "MNEME_CONSENT_REQUIRED": "false",
                                                           **env})
    stack.start_redis()
    try:
        mneme = Mneme(stack.settings)
        mneme.__dict__["_embedder"] = embedder
        for user in users:
            msgs = messages(user)
            texts = [html.unescape(clean(m["content"])) for m in msgs]
            before = ["", *texts[:-1]]  # the turn before, whole, as the embed stage reads it
            contexts = [b[:EMBED_MAX_CHARS] if i and msgs[i - 1]["session_id"] == m["session_id"] else ""
                        for i, (m, b) in enumerate(zip(msgs, before, strict=True))]
            vectors = embed_in_context(embedder, [t[:EMBED_MAX_CHARS] for t in texts], contexts,
                                       mneme.settings.context_vector_weight)
            for start in range(0, len(msgs), 32):
                batch = list(range(start, min(start + 32, len(msgs))))
                events, rows, texts = [], [], {}
                for i in batch:
                    m = msgs[i]
                    message = Message(tenant="default", user_id=user["user_id"], session_id=m["session_id"],
                                      device_id=m["device_id"], message_id=m["message_id"], role=Role(m["role"]),
                                      content=clean(m["content"]), client_ts=m["client_ts"])
                    for event in extract(message).events:
                        events.append(event)
                        rows.append(vectors[i])
                        texts[event.event_id] = message.content
                mneme.episodic.add(events, np.stack(rows), texts)
        out = {}
        for q in queries:
            now = q.get("now", NOW - q.get("asked_at_days_ago", 0) * DAY)
            out[q["query_id"]] = ranked_ids(recall(mneme, "default", q["user_id"], q["query"], k=k, now=now).events,
                                            named)
        return out
    finally:
        stack.stop()


# --- Mneme through the API and workers ------------------------------------------------------------------

def mneme_stack(users: list[dict], queries: list[dict], data_dir: Path, named: Named = as_fed, k: int = 10,
                env: dict | None = None) -> tuple[Ranked, dict]:
    """Feed every message through the API and workers (``env``: the stack's extra MNEME_ settings), then
    ask /v1/recall for ``k`` events a query, at the server's clock."""
    from mneme_client import MnemeClient

    from workers.local.stack import Stack, free_port

    stack = Stack(data_dir, api_port=free_port(), beat=False, flower=False, env={"MNEME_REDIS_URL": "", **(env or {})})
    stack.start()
    try:
        with MnemeClient(stack.api_url, timeout=120) as client:
            started, jobs = time.perf_counter(), []
            for user in users:
                client.consent(user["user_id"], operator_id="bench")
                for m in messages(user):
                    jobs.append(client.remember(
                        user_id=user["user_id"], session_id=m["session_id"], device_id=m["device_id"],
                        message_id=m["message_id"], role=m["role"], content=m["content"],
                        client_ts=m["client_ts"] * 1000).job_id)  # milliseconds: accepted and read as such
            done = client.wait(jobs, timeout=3600)
            failed = [j for j in done if j.state != "done"]
            if failed:
                raise RuntimeError(f"{len(failed)} jobs failed: {failed[0].error}")
            feed_rate = len(jobs) / (time.perf_counter() - started)
            out, took = {}, []
            for q in queries:
                t0 = time.perf_counter()
                result = client.recall(user_id=q["user_id"], query=q["query"], k=k)
                took.append((time.perf_counter() - t0) * 1000)
                out[q["query_id"]] = ranked_ids(result.events, named)
            return out, {"feed_messages_per_s": round(feed_rate, 1),
                         "recall_p50_ms": round(float(np.percentile(took, 50)), 2),
                         "recall_p95_ms": round(float(np.percentile(took, 95)), 2)}
    finally:
        stack.stop()


# --- report -------------------------------------------------------------------------------------------

def table(runs: dict[str, Ranked], queries: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    return {name: {label: score(ranked, qs) for label, qs in slices(queries).items()} for name, ranked in runs.items()}


def print_table(results: dict[str, dict[str, dict[str, float]]], metric: str = "R@10") -> None:
    names = list(results)
    labels = list(next(iter(results.values())))
    width = max(28, *(len(label) + 2 for label in labels))
    print(f"{metric:{width}}" + "".join(f"{n[:18]:>20}" for n in names) + f"{'n':>6}")
    for label in labels:
        row = [results[n][label].get(metric, float("nan")) for n in names]
        print(f"{label:{width}}" + "".join(f"{v:20.3f}" for v in row) + f"{results[names[0]][label]['n']:6d}")


def sweep(users: list[dict], queries: list[dict], run: Callable[[list[dict], list[dict]], dict[str, Ranked]]):
    """Questions about what each user said in their first 100 messages, asked after 100, 200, 500 and 1,000
    messages of history (a user with fewer has all of theirs)."""
    first = {u["user_id"]: {m["message_id"] for m in messages(truncated(u, min(SWEEP)))} for u in users}
    early = [q for q in queries if set(q["gold"]) <= first[q["user_id"]]]
    out = {}
    for limit in SWEEP:
        runs = run([truncated(u, limit) for u in users], early)
        out[limit] = {name: score(ranked, early) for name, ranked in runs.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-process", action="store_true", help="library calls, no HTTP or Celery (tuning)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--short", action="store_true", help="the hand-written short-history set of bench/data")
    parser.add_argument("--long-answers", action="store_true",
                        help="each assistant answer followed by 3 to 10 of the user's others (an agent's length)")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--only-sweep", action="store_true")
    parser.add_argument("--env", action="append", default=[], help="MNEME_X=value for the Mneme run")
    parser.add_argument("--per-session-ids", action="store_true",
                        help="feed Mneme message ids numbered per session (m1, m2, … in each), not unique per user")
    args = parser.parse_args()
    from memory.embedding import USEEmbedder

    users, queries = load(args.seed, args.short)
    users = with_long_answers(users) if args.long_answers else users
    lang = {u["user_id"]: u["lang"] for u in users}
    queries = [{**q, "user_lang": lang[q["user_id"]]} for q in queries]
    embedder = CachedEmbedder(USEEmbedder(), RESULTS / ".cache" / "use-multilingual-v3.npz")
    env = dict(e.split("=", 1) for e in args.env)
    started = time.perf_counter()

    def run(us: list[dict], qs: list[dict]) -> tuple[dict[str, Ranked], dict]:
        runs = {"BM25 (all messages)": run_bm25(us, qs), "flat vector (all)": run_flat(us, qs, embedder.embed)}
        fed, named = per_session_ids(us) if args.per_session_ids else (us, as_fed)
        with tempfile.TemporaryDirectory(prefix="mneme-long-") as tmp:
            if args.in_process:
                return {**runs, "Mneme (in process)": mneme_in_process(fed, qs, embedder, Path(tmp), env, named)}, {}
            ranked, figures = mneme_stack(fed, qs, Path(tmp), named)
            return {**runs, "Mneme (API+workers)": ranked}, figures

    n_msgs = [sum(len(s["messages"]) for s in u["sessions"]) for u in users]
    report: dict = {"users": len(users), "messages": sum(n_msgs), "queries": len(queries)}
    if not args.only_sweep:
        runs, extra = run(users, queries)
        results = table(runs, queries)
        print(f"{len(users)} users, {sum(n_msgs)} messages ({min(n_msgs)}–{max(n_msgs)} per user), "
              f"{len(queries)} queries; {extra}")
        for metric in ("R@1", "R@5", "R@10"):
            print_table(results, metric)
            print()
        report |= {**extra, "results": results}
    if not args.no_sweep:
        report["sweep"] = sweep(users, queries, lambda us, qs: run(us, qs)[0])
        print("history length sweep: R@10 of questions about each user's first 100 messages")
        for limit, figures in report["sweep"].items():
            print(f"  {limit:5d} messages: " + "  ".join(f"{n} {f.get('R@10', float('nan')):.3f}"
                                                      for n, f in figures.items()))
    report["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    name = ("recall_long_in_process" if args.in_process else "recall_long") + ("_sweep" if args.only_sweep else "")
    name += "_per_session_ids" if args.per_session_ids else ""
    name += "_long_answers" if args.long_answers else ""
    name += ".json"
    (RESULTS / name).write_text(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
