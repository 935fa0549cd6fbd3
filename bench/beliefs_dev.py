"""Beliefs against the labelled set: precision and coverage per relation and language, with the failing turns.

    python -m bench.beliefs_dev                       # the rules (what ``make bench-beliefs`` runs), both splits
    python -m bench.beliefs_dev --llm --sample 150    # and with the LLM stage (a local gemma-3-270m server)
    python -m bench.beliefs_dev --show 40             # up to 40 failing turns of each kind, with their text

The labelled turns, in two splits (``SPLITS``): ``tuning`` — ``bench/beliefs/dev_labels.jsonl`` (set, id, labels;
the text is read from shared/dev-data, whose licences forbid copying it, ``bench.belief_turns``) and
``bench/beliefs/cases.jsonl`` (our own hard cases, with their text), what the rules were written against — and
``holdout``, the same kinds labelled afterwards by others and never looked at while changing a rule
(``holdout_labels.jsonl``, ``holdout_cases.jsonl``): its figures are the honest ones. How a belief matches a
label: ``bench/beliefs/GUIDE.md``. A set whose folder is absent is skipped (its labels say nothing without the
text). Results (ids and figures only) go to ``bench/results/beliefs_dev[_llm].json``.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from bench.belief_turns import LANG, by_id
from bench.devsets import dev_data_root
from memory.anchoring import anchor, is_anaphoric
from memory.claims import find
from memory.claims.rule import CONFIDENCE
from memory.extraction import extract
from memory.models import Fact, FactSource, Message, Role
from memory.vocabulary import load_vocabulary

HERE = Path(__file__).resolve().parent
#: each split's files (dev sets' ids and labels; our own cases with their text): "tuning" — what the rules were
#: written against (the first round's held-out files, ``*_2``, joined it once read) — and "holdout", labelled apart
#: afterwards and never looked at while changing a rule
SPLITS = {"tuning": tuple(HERE / "beliefs" / f for f in ("dev_labels.jsonl", "dev_labels_2.jsonl",
                                                            "cases.jsonl", "cases_2.jsonl")),
          "holdout": (HERE / "beliefs" / "holdout_labels.jsonl", HERE / "beliefs" / "holdout_cases.jsonl")}
RESULTS = HERE / "results"
CALIBRATION_BINS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01)
_DROP = re.compile(r"[\s\"'“”‘’`.,!?;:，。！？；：、()（）\[\]【】《》*_-]+")
_LEADING = re.compile(r"^(?:the|a|an|my|our|his|her|their|some|this|that|these|those)\s+", re.I)

Extractor = Callable[[Message, str], list[Fact]]  # a user's message and the turn before it → its beliefs


def labelled(root: Path, split: str = "tuning") -> list[dict]:
    """Every labelled turn of ``split`` whose text is at hand: ``{"id", "set", "lang", "text", "before", "beliefs",
    "traps"}``."""
    lines = [json.loads(line) for f in SPLITS[split] for line in f.read_text().splitlines() if line.strip()]
    out = [line | {"set": "cases"} for line in lines if "text" in line]
    every = [line for line in lines if "text" not in line]
    for name in dict.fromkeys(label["set"] for label in every):
        labels = [label for label in every if label["set"] == name]
        if not (root / name / "load.py").exists():
            print(f"{name}: skipped, no {root / name}")
            continue
        text = by_id(name, {label["id"] for label in labels}, root)
        missing = [label["id"] for label in labels if label["id"] not in text]
        if missing:
            raise SystemExit(f"{name}: {len(missing)} labelled ids not in the data (first: {missing[0]})")
        out += [text[label["id"]] | label | {"set": name, "lang": LANG[name]} for label in labels]
    return out


def norm(text: str) -> str:
    text = html.unescape(text).lower().strip()
    while (shorter := _LEADING.sub("", text)) != text:
        text = shorter
    return _DROP.sub(" ", text).strip()


def _size(text: str) -> int:
    return len(text) if re.search(r"[\u4e00-\u9fff]", text) else len(text.split())


def same_object(made: str, label: str) -> bool:
    a, b = norm(made), norm(label)
    if not a or not b:
        return False
    if a == b:
        return True
    short, long = sorted((a, b), key=_size)
    return short in long and 2 * _size(short) >= _size(long)


def matches(fact: Fact, belief: dict, near: bool = False) -> bool:
    """The label's relation (or one it allows) and object (``same_object``; ``near``: either inside the other, a
    belief true of the user but worded longer or shorter than the label — "caffeine in all forms" for caffeine)."""
    relations = {belief["relation"], *belief.get("also_relations", [])}
    same = _inside if near else same_object
    return fact.relation in relations and any(same(fact.object, o) for o in [belief["object"], *belief.get("also", [])])


def _inside(made: str, label: str) -> bool:
    a, b = norm(made), norm(label)
    return bool(a and b) and (a in b or b in a)


def rules(message: Message, before: str) -> list[Fact]:
    """What the pipeline makes of a user's turn: the rules' facts, anchored on the turn before it as working
    memory holds it (``pipeline.anchor_facts``: "那个定律" → the 定律 just named, or no belief)."""
    return anchored(extract(message).facts, before)


def anchored(facts: list[Fact], before: str) -> list[Fact]:
    out = []
    for fact in facts:
        if not is_anaphoric(fact.object):
            out.append(fact)
        elif (found := anchor(fact.object, [("before", before)] if before else [])).anchored_to is not None:
            out.append(fact.model_copy(update={"object": found.name}))
    return out


def message_of(turn: dict) -> Message:
    return Message(tenant="bench", user_id="u", session_id="s", message_id="m", role=Role.user,
                   content=html.escape(turn["text"], quote=False), client_ts=time.time())


def judge(turns: Iterable[dict], extractor: Extractor) -> list[dict]:
    """Each turn with what was made: ``made`` [(relation, object, confidence, correct)], ``found`` [label hit]."""
    out = []
    for turn in turns:
        started = time.perf_counter()
        facts = extractor(message_of(turn), turn.get("before", ""))
        ms = 1000 * (time.perf_counter() - started)
        made = [(f.relation, f.object, f.confidence, any(matches(f, b) for b in turn["beliefs"]),
                 any(matches(f, b, near=True) for b in turn["beliefs"])) for f in facts]
        found = [any(matches(f, b) for f in facts) for b in turn["beliefs"]]
        out.append(turn | {"made": made, "found": found, "ms": ms, "families": families(turn["text"], facts)})
    return out


def families(text: str, facts: list[Fact]) -> list[str]:
    """The rule family (``memory.claims``) each fact came from; ``llm`` for the model's."""
    by = {(c.relation, c.object.casefold()): c.family for c in find(text, load_vocabulary())}
    return ["llm" if f.source is FactSource.llm
            else by.get((f.relation, html.unescape(f.object).casefold()), "anchored") for f in facts]


def calibration_by_family(judged: list[dict]) -> dict[str, dict[str, float]]:
    """Each family's beliefs made and right, and the confidence that measure gives it: (right + 1) / (made + 2)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in judged:
        for (_, _, _, ok, _), family in zip(t["made"], t["families"], strict=True):
            counts[family][0] += ok
            counts[family][1] += 1
    return {family: {"right": right, "made": made, "confidence": round((right + 1) / (made + 2), 2)}
            for family, (right, made) in sorted(counts.items())}


def with_llm(turns: list[dict], show: int) -> dict:
    """The pipeline's extraction with the LLM stage on: the rules, then the stage where the pipeline calls it
    (``pipeline.needs_llm``: a message they could not type or a claim less sure than ``llm_check_below``), the
    result anchored; the stage's cost per call (ms, tokens) added to the figures."""
    import redis

    from memory.llm import LLMExtractor
    from memory.settings import Settings
    from memory.state.llm_usage import LLMUsage
    from tests.llama_server import MODEL, LlamaServer
    from workers.local.stack import Stack, free_port

    spent: list[tuple[float, int, str]] = []
    with tempfile.TemporaryDirectory(prefix="mneme-beliefs-") as tmp, LlamaServer(threads=2) as server:
        only = Stack(Path(tmp), api_port=free_port(), flower_port=free_port(), env={"MNEME_REDIS_URL": ""})
        only.start_redis()
        client = redis.Redis.from_url(only.env["MNEME_REDIS_URL"], decode_responses=True)
        settings = Settings(llm_base_url=server.base_url, llm_model=MODEL, llm_response_format="llama_cpp",
                            llm_timeout_s=120, llm_daily_token_budget=10**9)
        try:
            with LLMExtractor(settings, LLMUsage(client)) as llm:
                def staged(message: Message, before: str) -> list[Fact]:
                    found = extract(message)
                    if all(e.event_type.value == "statement" for e in found.events) or any(
                            f.confidence < settings.llm_check_below for f in found.facts):
                        started = time.perf_counter()
                        found, outcome = llm.extract(message, found)
                        spent.append((1000 * (time.perf_counter() - started), outcome.tokens, outcome.reason))
                    return anchored(found.facts, before)

                figures = report(judge(turns, staged), show)
        finally:
            client.close()
            only.stop()
    ms = sorted(s[0] for s in spent)
    cost = {"calls": len(spent), "turns": len(turns), "ms_p50": ms[len(ms) // 2] if ms else None,
            "tokens_per_call": sum(s[1] for s in spent) / max(1, len(spent)),
            "outcomes": {r: sum(s[2] == r for s in spent) for r in {s[2] for s in spent}}}
    print(f"\nLLM stage: {cost['calls']} calls for {len(turns)} turns, p50 {cost['ms_p50'] or 0:,.0f} ms, "
          f"{cost['tokens_per_call']:,.0f} tokens a call, outcomes {cost['outcomes']}")
    return figures | {"llm_cost": cost}


def _pct(hits: int, n: int) -> str:
    return f"{100 * hits / n:5.1f}% ({hits}/{n})" if n else "    –"


def report(judged: list[dict], show: int) -> dict:
    """Prints the tables; returns the figures (no text)."""
    made: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (lang, relation) → [correct, made]
    covered: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (lang, relation) → [found, labels]
    for t in judged:
        lang = "en" if t["lang"] == "en" else "zh"  # mixed zh/en cases count with zh (Chinese-first)
        for relation, _, _, ok, _ in t["made"]:
            for key in ((lang, relation), (lang, "all"), ("all", "all")):
                made[key][0] += ok
                made[key][1] += 1
        for belief, ok in zip(t["beliefs"], t["found"], strict=True):
            for key in ((lang, belief["relation"]), (lang, "all"), ("all", "all")):
                covered[key][0] += ok
                covered[key][1] += 1
    sets = sorted({t["set"] for t in judged})
    sizes = ", ".join(f"{s} {sum(t['set'] == s for t in judged)}" for s in sets)
    print(f"{len(judged)} labelled turns ({sizes}), "
          f"{sum(len(t['beliefs']) for t in judged)} labelled beliefs, {sum(not t['beliefs'] for t in judged)} turns "
          f"with none")
    print(f"\n{'lang':5} {'relation':22} {'precision':>18} {'coverage':>18}")
    for key in sorted(set(made) | set(covered), key=lambda k: (k[0] == "all", k[0], k[1] == "all", k[1])):
        print(f"{key[0]:5} {key[1]:22} {_pct(*made[key]):>18} {_pct(*covered[key]):>18}")
    per_set = {}
    for s in sets:
        mine = [t for t in judged if t["set"] == s]
        ok = sum(m[3] for t in mine for m in t["made"])
        n = sum(len(t["made"]) for t in mine)
        hit = sum(sum(t["found"]) for t in mine)
        labels = sum(len(t["beliefs"]) for t in mine)
        per_set[s] = {"precision": ok / n if n else None, "made": n, "coverage": hit / labels if labels else None,
                      "labels": labels}
        print(f"set {s:18} precision {_pct(ok, n):>18}  coverage {_pct(hit, labels):>18}")
    print("\ncalibration (confidence → share correct):")
    calibration = []
    for lo, hi in zip(CALIBRATION_BINS, CALIBRATION_BINS[1:], strict=False):
        inside = [m[3] for t in judged for m in t["made"] if lo <= m[2] < hi]
        if inside:
            calibration.append({"from": lo, "to": hi, "n": len(inside), "correct": sum(inside) / len(inside)})
            print(f"  [{lo:.2f}, {min(hi, 1.0):.2f})  {_pct(sum(inside), len(inside))}")
    by_family = calibration_by_family(judged)
    print("\nby rule family (made, right, the confidence it measures: (right + 1) / (made + 2); "
          "memory/claims/rule.py):")
    for family, c in by_family.items():
        print(f"  {family:12} {_pct(int(c['right']), int(c['made'])):>18}  → {c['confidence']:.2f}"
              f"  (now {CONFIDENCE.get(family, float('nan')):.2f})")
    ms = sorted(t["ms"] for t in judged)
    print(f"\nextraction ms per turn: p50 {ms[len(ms) // 2]:.2f}, p95 {ms[int(len(ms) * 0.95)]:.2f}")
    if show:
        wrong = [t for t in judged if any(not m[3] for m in t["made"])]
        missed = [t for t in judged if not all(t["found"])]
        for title, rows in (("WRONG beliefs", wrong), ("MISSED labels", missed)):
            print(f"\n--- {title}: {len(rows)} turns (first {min(show, len(rows))}) ---")
            for t in rows[:show]:
                print(f"[{t['set']} {t['id']}] {' '.join(t['text'].split())[:300]}")
                print(f"    made {[(m[0], m[1]) for m in t['made']]}")
                print(f"    gold {[(b['relation'], b['object']) for b in t['beliefs']]}  traps {t.get('traps', [])}")
    near = {lang: [m[4] for t in judged for m in t["made"] if lang in ("all", "en" if t["lang"] == "en" else "zh")]
            for lang in ("zh", "en", "all")}
    print("\nprecision if a belief worded longer or shorter than its label counts (either inside the other): "
          + ", ".join(f"{lang} {_pct(sum(v), len(v)).strip()}" for lang, v in near.items()))
    overall = {"precision": made["all", "all"][0] / max(1, made["all", "all"][1]),
               "precision_near": sum(near["all"]) / max(1, len(near["all"])),
               "coverage": covered["all", "all"][0] / max(1, covered["all", "all"][1])}
    return {"overall": overall, "per_set": per_set, "calibration": calibration, "by_family": by_family,
            "by_language": {lang: {"precision": made[lang, "all"][0] / max(1, made[lang, "all"][1]),
                                   "coverage": covered[lang, "all"][0] / max(1, covered[lang, "all"][1])}
                            for lang in ("zh", "en")},
            "wrong_ids": [t["id"] for t in judged if any(not m[3] for m in t["made"])],
            "missed_ids": [t["id"] for t in judged if not all(t["found"])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", type=int, default=15, help="failing turns printed per kind (0: none)")
    parser.add_argument("--sets", default="", help="comma-separated: only these (cases, memdaily, …)")
    parser.add_argument("--llm", action="store_true", help="rules and the LLM stage against a local gemma-3-270m "
                        "server (tests/llama_server.py), beside the rules alone on the same turns")
    parser.add_argument("--sample", type=int, default=150, help="with --llm: every n-th turn to make about this many")
    parser.add_argument("--split", choices=[*SPLITS, "both"], default="both",
                        help="tuning (what the rules were written against), holdout (labelled apart), or both")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    figures: dict = {}
    for split in SPLITS if args.split == "both" else [args.split]:
        turns = labelled(dev_data_root(), split)
        if args.sets:
            turns = [t for t in turns if t["set"] in args.sets.split(",")]
        if args.llm:
            turns = turns[::max(1, len(turns) // args.sample)]
            print(f"=== {split}: rules alone, {len(turns)} turns ===")
            alone = report(judge(turns, rules), 0)
            print(f"\n=== {split}: rules + the LLM stage (gemma-3-270m, local), the same {len(turns)} turns ===")
            figures[split] = {"rules": alone, "with_llm": with_llm(turns, args.show)}
        else:
            print(f"=== {split} ===")
            figures[split] = report(judge(turns, rules), args.show)
        print()
    out = Path(args.out) if args.out else RESULTS / f"beliefs_dev{'_llm' if args.llm else ''}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
