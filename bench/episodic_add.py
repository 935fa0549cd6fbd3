"""The embedded episodic store's add, CPU per event: a history imported (batches of 32 events of one user who
holds 200 live events of that type) beside live traffic (batches of 32 users' events, one each).

    python -m bench.episodic_add [--batches 20]

Each event is checked against the live events it may merge with (same user, type, role and grants) before it
is stored; an import's batch reads those once and grows them as it inserts.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.episodic import StoredEvent
from memory.episodic.sqlite import SQLiteEpisodicStore
from memory.models import EventType, Role
from memory.purposes import ANY

BATCH, LIVE = 32, 200
_rng = np.random.default_rng(7)


def _event(i: int, user: str) -> StoredEvent:
    return StoredEvent(event_id=f"e{i}", tenant="t", user_id=user, session_id="s", ts=float(i),
                       event_type=EventType.preference, role=Role.user, lang="zh",
                       text_hash=hashlib.sha256(str(i).encode()).hexdigest(), message_ids=[f"m{i}"], confidence=0.8,
                       sealed=b"x" * 200, tokens=[f"t{i % 97}", f"t{i % 89}", f"t{i % 83}"] * 4, purposes=[ANY])


def _vectors(n: int) -> np.ndarray:
    v = _rng.standard_normal((n, 512)).astype(np.float32)  # random: nothing merges, every event is inserted
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _ms_per_event(store: SQLiteEpisodicStore, batches: list[list[StoredEvent]]) -> float:
    started = time.process_time()
    for events in batches:
        store.add(events, _vectors(len(events)), 0.95, 10**9)  # no cap: the add alone, not consolidation
    return (time.process_time() - started) / sum(map(len, batches)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteEpisodicStore(Path(tmp) / "episodic.db")
        users = [f"u{j}" for j in range(BATCH)]
        for k, user in enumerate(["importer", *users]):
            store.add([_event(10**7 + k * 1000 + i, user) for i in range(LIVE)], _vectors(LIVE),
                      0.95, 10**9)
        n = args.batches * BATCH
        one_user = [[_event(i, "importer") for i in range(b, b + BATCH)] for b in range(0, n, BATCH)]
        many = [[_event(n + b + j, users[j]) for j in range(BATCH)] for b in range(0, n, BATCH)]
        print(f"an import, {BATCH} events of one user a batch: {_ms_per_event(store, one_user):.3f} ms CPU per event")
        print(f"live traffic, {BATCH} users' events a batch:   {_ms_per_event(store, many):.3f} ms CPU per event")


if __name__ == "__main__":
    main()
