"""The embedded episodic store's add, CPU per event, beside the raw baseline of the same rows written with no
check (``bulk_insert``: no duplicate check, merge or cap):

- an import: batches of 32 events of one user who holds 200 live events of that type, the cap not reached;
- live traffic: batches of 32 users' events, one each, users holding 200 live events of five types, the cap not
  reached;
- live traffic at the cap: the same, each user's 200 live events (the cap) beside a history of ``--history`` rows
  that left the layer (a long-term user), so every event added sends one out of it.

    python -m bench.episodic_add [--batches 20] [--history 1000]

Each event is checked against the live events it may merge with (same user, type, role and grants) before it
is stored; an import's batch reads those once and grows them as it inserts. Over the cap, the user's live
events are weighed (``memory.episodic.plan_overflow``). One BLAS thread, as the workers run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: as the workers (a 2nd thread spins)

import numpy as np  # noqa: E402 - after the thread count is set

from memory.episodic import EVICTED, StoredEvent  # noqa: E402
from memory.episodic.sqlite import SQLiteEpisodicStore  # noqa: E402
from memory.models import EventType, Role  # noqa: E402
from memory.purposes import ANY  # noqa: E402

BATCH, LIVE = 32, 200
NO_CAP = 10**9  # the add alone: the first two cases' users stay below any cap
TYPES = (EventType.preference, EventType.statement, EventType.plan, EventType.question, EventType.emotion)
_rng = np.random.default_rng(7)


def _event(i: int, user: str, kind: EventType = EventType.preference, status: str = "live") -> StoredEvent:
    return StoredEvent(event_id=f"e{i}", tenant="t", user_id=user, session_id="s", ts=time.time() - i % 5000,
                       event_type=kind, role=Role.user, lang="zh", status=status,
                       text_hash=hashlib.sha256(str(i).encode()).hexdigest(), message_ids=[f"m{i}"], confidence=0.8,
                       sealed=b"x" * 200, tokens=[f"t{i % 97}", f"t{i % 89}", f"t{i % 83}"] * 4, purposes=[ANY])


def _vectors(n: int) -> np.ndarray:
    v = _rng.standard_normal((n, 512)).astype(np.float32)  # random: nothing merges, every event is inserted
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _ms_per_event(batches: list[list[StoredEvent]], write: Callable[[list[StoredEvent], np.ndarray], object]) -> float:
    vectors = [_vectors(len(events)) for events in batches]
    started = time.process_time()
    for events, rows in zip(batches, vectors, strict=True):
        write(events, rows)
    return (time.process_time() - started) / sum(map(len, batches)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--history", type=int, default=1000, help="rows out of the layer a user at the cap holds")
    args = parser.parse_args()
    n = args.batches * BATCH
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteEpisodicStore(Path(tmp) / "episodic.db")
        raw = SQLiteEpisodicStore(Path(tmp) / "raw.db")
        users = [f"u{j}" for j in range(BATCH)]
        capped = [f"c{j}" for j in range(BATCH)]
        store.bulk_insert([_event(10**7 + i, "importer") for i in range(LIVE)], _vectors(LIVE))
        for k, user in enumerate(users):
            store.bulk_insert([_event(10**7 + (k + 1) * 10**4 + i, user, TYPES[i % len(TYPES)]) for i in range(LIVE)],
                              _vectors(LIVE))
        for k, user in enumerate(capped):  # cap live events of several types, and the history before them
            first = 2 * 10**7 + k * 10**5
            held = [_event(first + i, user, TYPES[i % len(TYPES)]) for i in range(LIVE)]
            gone = [_event(first + LIVE + i, user, TYPES[i % len(TYPES)], EVICTED) for i in range(args.history)]
            store.bulk_insert(held + gone, _vectors(len(held) + len(gone)))

        def cases(start: int) -> dict[tuple[str, int], list[list[StoredEvent]]]:  # (name, cap) → batches
            return {
                (f"an import, {BATCH} events of one user a batch", NO_CAP):
                    [[_event(start + i, "importer") for i in range(b, b + BATCH)] for b in range(0, n, BATCH)],
                (f"live traffic, {BATCH} users' events a batch", NO_CAP):
                    [[_event(start + n + b + j, users[j], TYPES[(b + j) % len(TYPES)]) for j in range(BATCH)]
                     for b in range(0, n, BATCH)],
                (f"the same, each user at the cap ({LIVE} live, {args.history} before)", LIVE):
                    [[_event(start + 2 * n + b + j, capped[j], TYPES[(b + j) % len(TYPES)]) for j in range(BATCH)]
                     for b in range(0, n, BATCH)],
            }

        print(f"{'':62} {'Mneme':>7} {'raw':>7}  (ms of CPU per event; raw: bulk_insert, no check)")
        for ((name, cap), batches), raw_batches in zip(cases(0).items(), cases(10**8).values(), strict=True):
            mine = _ms_per_event(batches, lambda events, rows, cap=cap: store.add(events, rows, 0.95, cap))
            base = _ms_per_event(raw_batches, raw.bulk_insert)
            print(f"{name:62} {mine:7.3f} {base:7.3f}  {mine / base:5.1f}x")


if __name__ == "__main__":
    main()
