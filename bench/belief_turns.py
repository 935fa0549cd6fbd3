"""The user turns the labelled belief set is made of, read from shared/dev-data at run time (never copied).

A turn: ``{"id", "set", "lang", "text", "before"}`` — its data id, set, language, text and the other side's turn
just before it ("" when none). The labels (``bench/beliefs/dev_labels.jsonl``) hold only sets, ids and beliefs, as
the sets' licences require; ``bench/beliefs/cases.jsonl`` holds our own hand-written hard cases with their text.

    python -m bench.belief_turns --sample memdaily --n 220 > /tmp/memdaily_turns.jsonl   # how the ids were drawn
    python -m bench.belief_turns --sample memdaily --n 90 --seed 4242 --exclude bench/beliefs/dev_labels.jsonl
                                                            # dev_labels_2's (270 drawn, the first 90 new)
    python -m bench.belief_turns --sample memdaily --n 150 --seed 2026 --exclude bench/beliefs/dev_labels.jsonl \
        --exclude bench/beliefs/dev_labels_2.jsonl          # the held-out split's

Drawn so (n per set: dev_labels / dev_labels_2 / holdout_labels): memdaily 220 / 90 / 150, realmem 130 / 50 / 80,
prefeval 130 / 60 / 80, vehiclemembench 120 / 40 / 60; a draw that excludes asks for three times n and keeps the
first n not excluded.

vehiclemembench: each chat line is its speaker's own turn (the speaker is the user; the line before is
``before``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.devsets import SETS, dev_data_root, loader

LANG = {"memdaily": "zh", "realmem": "en", "prefeval": "en", "vehiclemembench": "en"}
_FIRST_PERSON = re.compile(r"我|\b(?:i|i'm|i've|my|me|mine)\b", re.I)
SAMPLE_SEED = 50  # the number: how the labelled ids were drawn
MAX_SAMPLED_CHARS = 1200  # longer turns (pasted papers, code) are drawn at a tenth of the rate


def turns(name: str, root: Path | None = None) -> Iterator[dict]:
    """Every user turn of set ``name``, in the data's order."""
    load = loader((root or dev_data_root()) / name)
    for _, sessions in load.iter_users():
        for s in sessions:
            before = ""
            for t in s["turns"]:
                own = t["role"] == "user" or name == "vehiclemembench"
                if own and t["text"].strip():
                    yield {"id": t["id"], "set": name, "lang": LANG[name], "text": t["text"], "before": before}
                before = t["text"] if name != "memdaily" else before


def by_id(name: str, wanted: set[str], root: Path | None = None) -> dict[str, dict]:
    """The turns of ``name`` whose ids are ``wanted``."""
    return {t["id"]: t for t in turns(name, root) if t["id"] in wanted}


def sample(name: str, n: int, seed: int = SAMPLE_SEED) -> list[dict]:
    """``n`` turns: half among those in the first person (where beliefs are), half from all; long ones rarer."""
    rng = random.Random(seed)
    every = [t for t in turns(name) if len(t["text"]) <= MAX_SAMPLED_CHARS or rng.random() < 0.1]
    first = [t for t in every if _FIRST_PERSON.search(t["text"])]
    picked = {t["id"]: t for t in rng.sample(first, min(len(first), n // 2))}
    rest = [t for t in every if t["id"] not in picked]
    picked |= {t["id"]: t for t in rng.sample(rest, min(len(rest), n - len(picked)))}
    return sorted(picked.values(), key=lambda t: t["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", choices=SETS, required=True)
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--seed", type=int, default=SAMPLE_SEED)
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="a labels file whose ids are left out (draws 3n, keeps n); may repeat")
    args = parser.parse_args()
    taken = {json.loads(line)["id"] for f in args.exclude for line in f.read_text().splitlines() if line.strip()}
    drawn = sample(args.sample, 3 * args.n if taken else args.n, args.seed)
    for t in [t for t in drawn if t["id"] not in taken][:args.n]:
        sys.stdout.write(json.dumps(t, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
