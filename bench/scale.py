"""Recall at scale: episodic search p50/p95 with N users × 1,000 messages in the embedded SQLite store (both
tiers searched), against a raw read of a user's vectors and a numpy top-5 (``recall`` of ``bench.bench``)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import statistics
import time
from pathlib import Path

import numpy as np

from bench.load import (
    TENANT,
    corpus,
    pct,
    queries,
)
from memory import ids
from memory.mneme import Mneme
from memory.models import Message, Role
from memory.settings import Settings
from memory.text import clean


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
            session = f"{user}-s{j // 20}"
            event_id = ids.event_id(TENANT, user, session, f"m{j}", t["event_type"].value)
            out.append(StoredEvent.model_construct(
                event_id=event_id, tenant=TENANT, user_id=user, session_id=session,
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
