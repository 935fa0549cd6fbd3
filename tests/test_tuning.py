"""LoRA query adapter: training works on real embeddings, and a published adapter goes live in the
running API without a restart."""

import json
import time

import numpy as np
import pytest

from memory.embedding import USEEmbedder
from memory.errors import InvalidInput
from memory.state import keys
from memory.tuning import QueryAdapter, TrainingPair, read_pairs, train
from workers.celery_app import create_celery

# Queries phrased the way this product's users ask, and the memory that answers each.
PAIRS = [
    ("我上次说哪个概念总搞混", "我总把加速度和速度搞混"),
    ("what did I say I mix up", "I always mix up mass and weight"),
    ("我之前说过我喜欢怎么学", "我喜欢用动画学物理"), ("how did I say I like to learn", "I learn best with diagrams"),
    ("我几岁来着", "我今年17岁"), ("how old did I tell you I am", "I'm 15 years old"),
    ("你上次给的变量名", "变量名叫 v_final"), ("the variable name you gave me", "call the variable total_cost"),
    ("上次那个方案是什么", "第一步列方程，第二步代入数值"),
    ("what was the plan again", "Step 1: outline; step 2: draft"),
    ("我说过讨厌什么", "我讨厌背公式"), ("what do I hate", "I can't stand long videos"),
]


def test_read_pairs_names_the_bad_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "a", "positive": "b"}\n{"query": "no positive"}\n')
    with pytest.raises(InvalidInput, match="pairs.jsonl:2"):
        read_pairs(path)


def test_training_fits_the_pairs_and_saves_a_usable_adapter(tmp_path):
    embedder = USEEmbedder()
    pairs = [TrainingPair(query=q, positive=p) for q, p in PAIRS]
    report = train(embedder, pairs, tmp_path, rank=4, epochs=80)
    assert report.loss_last < report.loss_first / 2
    adapter = QueryAdapter.load(tmp_path, report.version, embedder.dim)
    q, p = embedder.embed([x.query for x in pairs]), embedder.embed([x.positive for x in pairs])
    before = np.mean(np.argmax(q @ p.T, axis=1) == np.arange(len(pairs)))
    after = np.mean(np.argmax(adapter.apply(q) @ p.T, axis=1) == np.arange(len(pairs)))
    assert after > before and after == 1.0
    assert (tmp_path / report.version / "adapter_config.json").exists()  # the peft adapter itself


def test_published_adapter_goes_live_in_the_running_api(stack, runtime, client, uid):
    jobs = [client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role="user",
                            content=p).job_id for i, (_, p) in enumerate(PAIRS[:4])]
    client.wait(jobs)

    def sims():
        hits = client.recall(user_id=f"u{uid}", query="我上次说哪个概念总搞混", k=4).events
        return {h.event_id: h.why.get("vector_sim") for h in hits}

    before = sims()
    path = stack.data_dir / f"pairs-{uid}.jsonl"
    path.write_text("".join(json.dumps({"query": q, "positive": p}, ensure_ascii=False) + "\n" for q, p in PAIRS))
    celery = create_celery(stack.settings)
    celery.send_task("memory.train_adapter", kwargs={"pairs_path": str(path), "rank": 4, "epochs": 40})
    deadline = time.monotonic() + 240  # the worker imports torch and peft first (a minute of a cold box)
    while not runtime.state.client.get(keys.ADAPTER_CURRENT):
        assert time.monotonic() < deadline, "adapter was not published"
        time.sleep(0.5)
    try:  # same query, same events, new query vector: no restart needed (the API re-reads every 2 s)
        deadline = time.monotonic() + 30
        while sims() == before:
            assert time.monotonic() < deadline, "the API still answers with the bare embedder"
            time.sleep(0.2)
    finally:
        runtime.state.client.delete(keys.ADAPTER_CURRENT)  # other tests use the bare embedder
