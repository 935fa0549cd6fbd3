"""The public dev sets of shared/dev-data as the recall benches' users and queries (for bench/recall_dev.py).

    for ds in load_sets(dev_data_root(), ["memdaily", "realmem"], now=time.time()):
        ds.users, ds.queries

Their licences forbid shipping them: they are read at run time from ``MNEME_DEV_DATA`` (default
``<repo>/../shared/dev-data``), each through its own stdlib ``load.py``; nothing of them goes into the repo.

A user: ``{"user_id", "lang", "sessions": [{"session_id", "device_id", "messages": [{"message_id", "role",
"content", "client_ts", "lang"}]}]}``. A query: ``{"query_id", "user_id", "query", "gold", "category", "lang",
"user_lang", "now"}``, and where the set has them ``before`` (only messages before this one count), ``any_gold``
(a hit is any gold in the top k), ``shape``, ``gold_position`` (first / middle / last third of the user's
messages, by the earliest gold). Ids are the data's with "/" as "." (the API's id pattern). Each user's
timeline keeps the data's dates (prefeval has none: its sessions a few minutes apart), shifted so that its end,
the latest query or message, falls a day before ``now``; a query's ``now`` is when it is asked.
"""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
SETS = ("memdaily", "realmem", "prefeval", "vehiclemembench")
DAY = 86400.0
TURN_S = 45.0  # between turns where the data's clock is coarser (a day, a minute)
SESSION_GAP_S = 300.0  # prefeval has no dates: its items' sessions a few minutes apart
MAX_CHARS = 20_000  # the API's content limit (content_max_chars): a longer message is cut there, for every system
#: memdaily's default: one file per question type, over the scenarios (~5.7k messages, 687 queries)
MEMDAILY_FILES = ("01_simple_hybrid", "02_conditional_roles", "03_comparative_events", "04_aggregative_roles",
                  "05_post_processing_events", "06_noisy_roles")
PREFEVAL_FORMS = ("explicit", "choice", "persona")


@dataclass
class DevSet:
    """One set as the bench runs it: its users, its queries, how a query is scored, and what was left out."""

    name: str
    users: list[dict]
    queries: list[dict]
    metric: str = "recall"  # or "hit": any gold in the top k
    notes: dict[str, int] = field(default_factory=dict)  # what the adapter dropped or cut, counted


def dev_data_root(repo: Path = REPO) -> Path:
    """``MNEME_DEV_DATA`` (relative to the repo root), or the repo's ``../shared/dev-data``."""
    return (repo / os.environ.get("MNEME_DEV_DATA", "../shared/dev-data")).resolve()


def load_sets(root: Path, names: Iterable[str], now: float, full: bool = False, seed: int = 7) -> Iterator[DevSet]:
    """Each named set found under ``root``, sampled with ``seed`` (``full``: all of it); one printed line for a
    set whose folder is absent."""
    for name in names:
        if name not in ADAPTERS:
            raise ValueError(f"unknown dev set {name!r}; known: {', '.join(SETS)}")
        if not (root / name / "load.py").exists():
            print(f"{name}: skipped, no {root / name}")
            continue
        ds = ADAPTERS[name](loader(root / name), full, random.Random(seed))
        shift(ds, now)
        yield ds


def loader(folder: Path) -> ModuleType:
    """A set's ``load.py``, imported by path (its data is read from beside it)."""
    spec = importlib.util.spec_from_file_location(f"devset_{folder.name}", folder / "load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- shared helpers -------------------------------------------------------------------------------------

def safe(data_id: str) -> str:
    return data_id.replace("/", ".")


def parse_ts(date: str) -> float:
    """Unix seconds (UTC) of "YYYY-MM-DD" or "YYYY-MM-DD HH:MM"."""
    fmt = "%Y-%m-%d %H:%M" if " " in date else "%Y-%m-%d"
    return datetime.strptime(date, fmt).replace(tzinfo=UTC).timestamp()


def stamped(turns: list[dict], lang: str, notes: dict[str, int], start: float = float("-inf")) -> list[dict]:
    """Messages from a loader's turns in time order: each at its date (or ``start`` for undated turns), at least
    TURN_S after the one before; empty texts dropped, texts over MAX_CHARS cut (both counted in ``notes``)."""
    out: list[dict] = []
    last = start - TURN_S
    for t in turns:
        text = t["text"]
        if not text.strip():
            count(notes, "empty messages dropped")
            continue
        if len(text) > MAX_CHARS:
            count(notes, f"messages cut to {MAX_CHARS:,} characters")
        last = max(parse_ts(t["date"]) if t["date"] else start, last + TURN_S)
        out.append({"message_id": safe(t["id"]), "role": t["role"], "content": text[:MAX_CHARS], "client_ts": last,
                    "lang": lang})
    return out


def by_session(sessions: list[dict], msgs: list[dict]) -> list[tuple[str, list[dict]]]:
    """Stamped messages put back in their loader sessions: (session id, messages) in the loader's order."""
    of = {safe(t["id"]): s["session_id"] for s in sessions for t in s["turns"]}
    out: dict[str, list[dict]] = {s["session_id"]: [] for s in sessions}
    for m in msgs:
        out[of[m["message_id"]]].append(m)
    return list(out.items())


def count(notes: dict[str, int], what: str) -> None:
    notes[what] = notes.get(what, 0) + 1


def shift(ds: DevSet, now: float) -> None:
    """Move each user's timeline (messages and queries' ``now``) so that its end, the latest query or message
    (realmem's history goes on after its last usable query), is a day before ``now``."""
    end: dict[str, float] = {}
    for q in ds.queries:
        end[q["user_id"]] = max(end.get(q["user_id"], float("-inf")), q["now"])
    for u in ds.users:
        for m in (m for s in u["sessions"] for m in s["messages"]):
            end[u["user_id"]] = max(end.get(u["user_id"], float("-inf")), m["client_ts"])
    for u in ds.users:
        for m in (m for s in u["sessions"] for m in s["messages"]):
            m["client_ts"] += now - DAY - end[u["user_id"]]
    for q in ds.queries:
        q["now"] += now - DAY - end[q["user_id"]]


def user(user_id: str, lang: str, sessions: list[tuple[str, list[dict]]]) -> dict:
    """A bench user from (data session id, messages) pairs; one device, sessions without a message left out."""
    device = f"{user_id}-device"
    return {"user_id": user_id, "lang": lang, "sessions": [
        {"session_id": safe(sid), "device_id": device, "messages": msgs} for sid, msgs in sessions if msgs]}


def third(index: int, total: int) -> str:
    return ("first", "middle", "last")[min(2, 3 * index // max(1, total))]


def with_gold_position(users: list[dict], queries: list[dict]) -> None:
    """Each query's ``gold_position``: the third of its user's messages (in time order) its earliest gold is in."""
    for u in users:
        ordered = sorted((m["client_ts"], i, m["message_id"]) for i, m in
                         enumerate(m for s in u["sessions"] for m in s["messages"]))
        position = {mid: i for i, (_, _, mid) in enumerate(ordered)}
        for q in queries:
            if q["user_id"] == u["user_id"]:
                q["gold_position"] = third(min(position[g] for g in q["gold"]), len(position))


# --- the sets -------------------------------------------------------------------------------------------

def memdaily(load: ModuleType, full: bool, rng: random.Random) -> DevSet:
    """One user per file, every trajectory of it pooled (same-template confusers); default MEMDAILY_FILES."""
    notes: dict[str, int] = {}
    files: dict[str, list[tuple[str, list[dict]]]] = {}
    for traj_id, sessions in load.iter_users():
        stem = traj_id.split("/")[0]
        if full or stem in MEMDAILY_FILES:
            msgs = stamped([t for s in sessions for t in s["turns"]], "zh", notes)
            files.setdefault(stem, []).extend(by_session(sessions, msgs))
    users = [user(f"memdaily.{stem}", "zh", sessions) for stem, sessions in files.items()]
    queries = []
    for q in load.iter_queries():
        stem = q["user_id"].split("/")[0]
        if stem in files:
            qtype = q["category"].split("/")[0]
            queries.append({"query_id": safe(q["qid"]), "user_id": f"memdaily.{stem}", "query": q["text"],
                            "gold": [safe(g) for g in q["gold_ids"]], "category": qtype, "lang": "zh",
                            "user_lang": "zh", "now": parse_ts(q["date"]),
                            "shape": "in small talk" if qtype == "noisy" else "plain"})
    return DevSet("memdaily", users, queries, notes=notes)


def realmem(load: ModuleType, full: bool, rng: random.Random, n_users: int = 5) -> DevSet:
    """A few users, all their turns; queries with complete turn-level gold, each counting only what came before it."""
    notes: dict[str, int] = {}
    everyone = dict(load.iter_users())
    chosen = sorted(everyone) if full else sorted(rng.sample(sorted(everyone), min(n_users, len(everyone))))
    users: list[dict] = []
    ts: dict[str, float] = {}
    for name in chosen:
        msgs = stamped([t for s in everyone[name] for t in s["turns"]], "en", notes)
        ts |= {m["message_id"]: m["client_ts"] for m in msgs}
        users.append(user(name, "en", by_session(everyone[name], msgs)))
    queries = []
    for q in load.iter_queries():
        if q["user_id"] not in chosen or not q["gold_ids_complete"]:
            continue
        asked = safe(q["asked_at"])
        gold = [safe(g) for g in q["gold_ids"]]
        if asked not in ts or any(g not in ts for g in gold):
            count(notes, "queries dropped: question or gold turn empty")
            continue
        if any(ts[g] >= ts[asked] for g in gold):
            count(notes, "queries dropped: a gold turn not before the question")
            continue
        queries.append({"query_id": safe(q["qid"]), "user_id": q["user_id"], "query": q["text"], "gold": gold,
                        "category": q["category"], "shape": q["session_type"], "lang": "en", "user_lang": "en",
                        "now": ts[asked], "before": asked})
        said = dialogue_so_far(users, q["user_id"], asked, avoid=gold)
        if said:  # the same ask as an agent sends it: the dialogue so far
            queries.append({**queries[-1], "query_id": f"{queries[-1]['query_id']}.dialogue", "query": said,
                            "shape": "dialogue"})
    with_gold_position(users, queries)
    return DevSet("realmem", users, queries, notes=notes)


DIALOGUE_TURNS, DIALOGUE_TURN_CHARS = 3, 500  # a dialogue-shaped query: the last turns, each cut as a window shows it


def dialogue_so_far(users: list[dict], user_id: str, asked: str, avoid: Iterable[str] = ()) -> str:
    """The query turn with the turns before it in its session, as ``user: …`` / ``assistant: …`` lines (the
    shape an agent sends its conversation in); "" when it opens its session or a turn of it is one to ``avoid``
    (a gold turn the agent still holds in its window is no test of recall)."""
    [owner] = [u for u in users if u["user_id"] == user_id]
    for session in owner["sessions"]:
        ids = [m["message_id"] for m in session["messages"]]
        if asked in ids:
            turns = session["messages"][max(0, ids.index(asked) - DIALOGUE_TURNS + 1): ids.index(asked) + 1]
            if len(turns) < 2 or set(avoid) & {m["message_id"] for m in turns}:
                return ""
            return "\n".join(f"{m['role']}: {' '.join(m['content'].split())[:DIALOGUE_TURN_CHARS]}" for m in turns)
    return ""


def prefeval(load: ModuleType, full: bool, rng: random.Random, n_items: int = 400) -> DevSet:
    """Per form, one user holding N items' sessions (the same items in each form); the query is an item's
    question, a hit any turn of its session (explicit: its one turn)."""
    notes: dict[str, int] = {}
    keys = sorted({uid.split("/", 1)[1] for uid, _ in load.iter_users(("explicit",))})
    picked = keys if full else rng.sample(keys, min(n_items, len(keys)))  # in the sampled order: the feed's
    users, queries = [], []
    for form in PREFEVAL_FORMS:
        items = dict(load.iter_users((form,)))
        user_id, clock, sessions = f"prefeval.{form}", parse_ts("2025-01-01"), []
        for key in picked:
            for s in items[f"{form}/{key}"]:
                msgs = stamped(s["turns"], "en", notes, start=clock)
                clock += len(msgs) * TURN_S + SESSION_GAP_S
                sessions.append((s["session_id"], msgs))
        users.append(user(user_id, "en", sessions))
        turns = {safe(sid): [m["message_id"] for m in msgs] for sid, msgs in sessions}
        wanted = {f"{form}/{key}" for key in picked}
        for q in load.iter_queries((form,)):
            if q["user_id"] in wanted:
                gold = [safe(g) for g in q["gold_ids"]] or turns[safe(q["gold_sessions"][0])]
                queries.append({"query_id": safe(q["qid"]), "user_id": user_id, "query": q["text"], "gold": gold,
                                "category": form, "lang": "en", "user_lang": "en", "now": clock, "any_gold": True})
    return DevSet("prefeval", users, queries, metric="hit", notes=notes)


def vehiclemembench(load: ModuleType, full: bool, rng: random.Random, n_households: int = 12) -> DevSet:
    """A few households, one message a log line ("<Speaker>: <text>", role user); queries after the whole log."""
    notes: dict[str, int] = {}
    everyone = dict(load.iter_users())
    chosen = sorted(everyone) if full else sorted(rng.sample(sorted(everyone), min(n_households, len(everyone))))
    users, last = [], {}
    for name in chosen:
        lines = [{**t, "role": "user", "text": f"{t['role']}: {t['text']}"} for s in everyone[name] for t in s["turns"]]
        msgs = stamped(lines, "en", notes)
        last[name] = msgs[-1]["client_ts"]
        users.append(user(name, "en", by_session(everyone[name], msgs)))
    queries = []
    for q in load.iter_queries():
        if q["user_id"] not in chosen:
            continue
        if not q["gold_ids"]:
            count(notes, "queries dropped: no gold line placed")
            continue
        queries.append({"query_id": safe(q["qid"]), "user_id": q["user_id"], "query": q["text"],
                        "gold": [safe(g) for g in q["gold_ids"]], "category": q["category"], "lang": "en",
                        "user_lang": "en", "now": last[q["user_id"]] + 3600})
    with_gold_position(users, queries)
    return DevSet("vehiclemembench", users, queries, notes=notes)


ADAPTERS = {"memdaily": memdaily, "realmem": realmem, "prefeval": prefeval, "vehiclemembench": vehiclemembench}
