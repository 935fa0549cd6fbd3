"""Recall benchmark on the hand-written zh + en dataset in bench/data/.

    python -m bench.recall          (or `make bench-recall`)

Each query is asked in a later session; a system returns ranked message ids; recall@k is the share of a
query's gold message ids among the first k ids, averaged over the test queries. Systems, all run here:

- flat vector: every message embedded (the same multilingual embedder), nearest messages of the user;
- BM25 (bigram) and BM25 (jieba): every message as a document, per user, the two Chinese tokenisers;
- Mneme: the real stack (API + Celery workers) fed every conversation, queried through /v1/recall;
- Mneme + LoRA: the same after `memory.train_adapter` on the train split (held-out test queries).

Prints a table and writes bench/results/recall.json.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from mneme_client import MnemeClient

from memory.crypto import keyed_tokens
from memory.embedding import USEEmbedder
from memory.text import clean, language, tokenize
from workers.celery_app import create_celery
from workers.local.stack import Stack, free_port

DATA = Path(__file__).parent / "data"
KS = (1, 5, 10)


def load() -> tuple[list[dict], list[dict]]:
    users = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    queries = json.loads((DATA / "queries.json").read_text(encoding="utf-8"))
    return users, queries


def messages_by_user(users: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for user in users:
        for session in user["sessions"]:
            out[user["user_id"]] += session["messages"]
    return out


def recall_at(ranked: list[str], gold: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def score(ranked_by_query: dict[str, list[str]], queries: list[dict]) -> dict[str, float]:
    return {f"R@{k}": float(np.mean([recall_at(ranked_by_query[q["query_id"]], q["gold"], k) for q in queries]))
            for k in KS}


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs, self.k1, self.b = [Counter(d) for d in docs], k1, b
        self.avg = max(1e-9, sum(len(d) for d in docs) / max(1, len(docs)))
        df = Counter(t for d in docs for t in set(d))
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.lengths = [len(d) for d in docs]

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for i, (doc, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            for t in set(query):
                if t in doc:
                    tf = doc[t]
                    norm = self.k1 * (1 - self.b + self.b * length / self.avg)
                    out[i] += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
        return out


def run_flat(users: list[dict], queries: list[dict], embedder: USEEmbedder) -> dict[str, list[str]]:
    by_user = messages_by_user(users)
    vectors = {u: embedder.embed([clean(m["content"]) for m in msgs]) for u, msgs in by_user.items()}
    out = {}
    for q in queries:
        sims = vectors[q["user_id"]] @ embedder.embed([q["query"]])[0]
        out[q["query_id"]] = [by_user[q["user_id"]][i]["message_id"] for i in np.argsort(-sims)]
    return out


def run_bm25(users: list[dict], queries: list[dict], method: str, keyed: bool = False) -> dict[str, list[str]]:
    """BM25 per user; ``keyed`` indexes HMAC hashes of the tokens under a per-user key, as Mneme stores them."""
    by_user = messages_by_user(users)
    user_keys = {u: os.urandom(32) for u in by_user}

    def tokens(user: str, text: str) -> list[str]:
        plain = tokenize(text, method)
        return keyed_tokens(user_keys[user], plain) if keyed else plain

    index = {u: BM25([tokens(u, m["content"]) for m in msgs]) for u, msgs in by_user.items()}
    out = {}
    for q in queries:
        s = index[q["user_id"]].scores(tokens(q["user_id"], q["query"]))
        order = [i for i in np.argsort(-s, kind="stable") if s[i] > 0]
        out[q["query_id"]] = [by_user[q["user_id"]][i]["message_id"] for i in order]
    return out


def feed(client: MnemeClient, users: list[dict]) -> float:
    """Post every conversation in time order; returns messages per second until all jobs are done."""
    now, jobs, started = time.time(), [], time.perf_counter()
    for user in users:
        client.consent(user["user_id"], operator_id="bench")
        for session in sorted(user["sessions"], key=lambda s: -s["days_ago"]):
            for i, m in enumerate(session["messages"]):
                accepted = client.remember(
                    # a device belongs to one account: the data's device names ("phone") are per user
                    user_id=user["user_id"], session_id=session["session_id"],
                    device_id=f"{user['user_id']}-{session['device_id']}",
                    message_id=m["message_id"], role=m["role"], content=m["content"],
                    client_ts=now - session["days_ago"] * 86400 + i * 30)
                jobs.append(accepted.job_id)
    done = client.wait(jobs, timeout=600)
    failed = [j for j in done if j.state != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs failed: {failed[0].error}")
    return len(jobs) / (time.perf_counter() - started)


def run_mneme(client: MnemeClient, queries: list[dict]) -> dict[str, list[str]]:
    out = {}
    for q in queries:
        result = client.recall(user_id=q["user_id"], query=q["query"], k=10)
        ranked: list[str] = []
        for event in result.events:
            ranked += [m for m in event.message_ids if m not in ranked]
        out[q["query_id"]] = ranked
    return out


def train_pairs(users: list[dict], queries: list[dict], path: Path) -> int:
    text = {m["message_id"]: m["content"] for msgs in messages_by_user(users).values() for m in msgs}
    lines = [json.dumps({"query": q["query"], "positive": text[g]}, ensure_ascii=False)
             for q in queries if q["split"] == "train" for g in q["gold"]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def by_slice(ranked: dict[str, list[str]], queries: list[dict], users: list[dict]) -> dict[str, dict[str, float]]:
    text = {m["message_id"]: m["content"] for msgs in messages_by_user(users).values() for m in msgs}
    cross = [q for q in queries if language(q["query"]) != language(" ".join(text[g] for g in q["gold"]))]
    same = [q for q in queries if q not in cross]
    return {"same-language": score(ranked, same), "cross-language": score(ranked, cross)}


def main() -> None:
    users, queries = load()
    test = [q for q in queries if q["split"] == "test"]
    embedder = USEEmbedder()
    runs: dict[str, dict[str, list[str]]] = {
        "flat vector (all messages)": run_flat(users, test, embedder),
        "BM25, bigram": run_bm25(users, test, "bigram"),
        "BM25, bigram, HMAC tokens": run_bm25(users, test, "bigram", keyed=True),
        "BM25, jieba": run_bm25(users, test, "jieba"),
    }
    with tempfile.TemporaryDirectory(prefix="mneme-bench-") as tmp:
        stack = Stack(Path(tmp), api_port=free_port(), beat=False, flower=False, env={"MNEME_REDIS_URL": ""})
        stack.start()
        try:
            with MnemeClient(stack.api_url, timeout=120) as client:
                rate = feed(client, users)
                runs["Mneme (API + workers)"] = run_mneme(client, test)
                pairs = train_pairs(users, queries, Path(tmp) / "train.jsonl")
                create_celery(stack.settings).send_task(
                    "memory.train_adapter", kwargs={"pairs_path": str(Path(tmp) / "train.jsonl")})
                from memory.mneme import Mneme

                published = Mneme(stack.settings).state.adapter
                deadline = time.monotonic() + 300
                while not published.current() and time.monotonic() < deadline:
                    time.sleep(0.5)
                time.sleep(2.5)
                runs["Mneme + LoRA query adapter"] = run_mneme(client, test)
        finally:
            stack.stop()
    results = {name: {**score(r, test), **{f"{s} {k}": v for s, m in by_slice(r, test, users).items()
                                            for k, v in m.items() if k == "R@5"}}
               for name, r in runs.items()}
    header = f"{'system':30} " + " ".join(f"{k:>7}" for k in next(iter(results.values())))
    print(f"{len(test)} test queries ({len(queries) - len(test)} train, {pairs} training pairs); "
          f"pipeline fed at {rate:.1f} messages/s\n{header}")
    for name, figures in results.items():
        print(f"{name:30} " + " ".join(f"{v:7.3f}" for v in figures.values()))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "recall.json").write_text(json.dumps({"test_queries": len(test), "training_pairs": pairs,
                                                 "feed_messages_per_s": rate, "results": results}, indent=2))


if __name__ == "__main__":
    main()
