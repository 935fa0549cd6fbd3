"""The embedded episodic store's vector search for one user by how many rows the user holds (a long-term user's
every message stays searchable: the event layer's 200 live events and the deep tier's rows), beside the raw
baseline of the same search over the same vectors already in memory (numpy: one product, one sort).

    python -m bench.search_rows [--rows 1000,5000,20000] [--queries 200]

CPU time is not the point here but the wait: p50 and p95 of wall time, one BLAS thread, as the API runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: as the API runs

import numpy as np  # noqa: E402 - after the thread count is set

from bench.episodic_add import LIVE, TYPES, _event, _vectors  # noqa: E402
from memory.episodic import EVICTED  # noqa: E402
from memory.episodic import LIVE as LIVE_STATUS
from memory.episodic.sqlite import SQLiteEpisodicStore  # noqa: E402

K = 50  # a recall's search depth


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.95)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1000,5000,20000", help="rows a user holds, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    print(f"{'rows of one user':>18} {'Mneme p50 / p95':>18} {'raw p50 / p95':>16}  (ms; raw: numpy over the "
          "vectors in memory)")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteEpisodicStore(Path(tmp) / "episodic.db")
        for u, n in enumerate(int(r) for r in args.rows.split(",")):
            user, vectors = f"u{u}", _vectors(n)
            store.bulk_insert([_event(u * 10**7 + i, user, TYPES[i % len(TYPES)],
                                      LIVE_STATUS if i < LIVE else EVICTED) for i in range(n)], vectors)
            queries = _vectors(args.queries)
            mine, raw = [], []
            for query in queries:
                started = time.perf_counter()
                store.vector_search("t", user, query, None, K)
                mine.append(time.perf_counter() - started)
                started = time.perf_counter()
                np.argsort(-(vectors @ query), kind="stable")[:K]
                raw.append(time.perf_counter() - started)
            (m50, m95), (r50, r95) = _percentiles(mine), _percentiles(raw)
            print(f"{n:>18,} {m50:8.1f} / {m95:6.1f} {r50:7.1f} / {r95:6.1f}  {m50 / r50:5.1f}x")


if __name__ == "__main__":
    main()
