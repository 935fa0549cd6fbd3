"""Validate a LongMem benchmark directory (stdlib only).

Usage:   python bench/longmem/validate.py DIR        (exit 1 and a list of problems on failure)
Library: from bench.longmem.validate import validate; errors = validate(users, queries)

Checks structure and ids, per-user history size, session ordering, language tags against the text, gold and
hard-negative references, the paraphrase rule (see ``textrules``) and coverage minimums for categories, query
shapes, languages and fact positions.  Prints a summary table.
"""

import json
import os
import re
import statistics
import sys
from collections import Counter, defaultdict

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "bench.longmem"

from .textrules import cjk_share, fact_position, has_cjk, shared_run  # noqa: E402

USER_LANGS = {"zh", "en", "mixed"}
QUERY_LANGS = {"zh", "en"}
CATEGORIES = {"name", "place", "number", "code", "date", "preference", "event"}
SHAPES = {"plain", "dialogue", "temporal", "cross_lingual"}
POSITIONS = {"early", "middle", "late"}
MIN_USERS_PER_LANG = 4
MIN_MESSAGES, MIN_SESSIONS = 500, 20
BIG_MESSAGES, BIG_SESSIONS = 900, 30
MIN_QUERIES, MIN_PER_CATEGORY = 40, 3
MIN_SHAPE_SHARE = {"dialogue": 0.10, "temporal": 0.10}
MIN_CROSS_SHARE_MIXED = 0.25
MIN_POSITION_SHARE = 0.15
MIN_HARD_NEGATIVE_SHARE = 0.5
ACK_SHARE = (0.12, 0.30)
QUERY_FIELDS = {"query_id": str, "user_id": str, "query": str, "lang": str, "gold": list, "hard_negatives": list,
                "category": str, "shape": str, "fact_session_index": int, "fact_position": str, "cue_terms": list,
                "asked_at_days_ago": int}
DIALOGUE_LINE = re.compile(r"^(user|assistant): \S")


def is_ack(text: str) -> bool:
    """Short acknowledgement / greeting / thanks (what the benchmark calls small talk)."""
    return len(text) <= (8 if has_cjk(text) else 22)


# ------------------------------------------------------------------------------------------------ conversations
def check_user(user: dict, errors: list[str]) -> dict[str, tuple]:
    """Structural checks on one user; returns message_id -> (session index, role, content)."""
    uid, lang = user.get("user_id"), user.get("lang")
    if lang not in USER_LANGS:
        errors.append(f"{uid}: bad lang {lang!r}")
    sessions = user.get("sessions") or []
    index: dict[str, tuple] = {}
    if len(sessions) < MIN_SESSIONS:
        errors.append(f"{uid}: {len(sessions)} sessions < {MIN_SESSIONS}")
    prev_days = None
    for i, s in enumerate(sessions):
        sid = s.get("session_id")
        if sid != f"{uid}_s{i + 1:02d}":
            errors.append(f"{uid}: session {i} has id {sid!r}, expected {uid}_s{i + 1:02d}")
        if not str(s.get("device_id", "")).startswith(f"{uid}_"):
            errors.append(f"{sid}: device_id {s.get('device_id')!r} is not namespaced by user")
        days = s.get("days_ago")
        if not isinstance(days, int) or not 0 <= days <= 400:
            errors.append(f"{sid}: days_ago {days!r} outside 0..400")
        elif prev_days is not None and days >= prev_days:
            errors.append(f"{sid}: days_ago {days} not strictly decreasing (previous {prev_days})")
        prev_days = days if isinstance(days, int) else prev_days
        msgs = s.get("messages") or []
        if not 6 <= len(msgs) <= 40:
            errors.append(f"{sid}: {len(msgs)} messages outside 6..40")
        check_messages(sid, i, msgs, index, errors)
    if sessions and isinstance(sessions[-1].get("days_ago"), int) and sessions[-1]["days_ago"] > 7:
        errors.append(f"{uid}: last session is {sessions[-1]['days_ago']} days ago (expected a few days)")
    if len(index) < MIN_MESSAGES:
        errors.append(f"{uid}: {len(index)} messages < {MIN_MESSAGES}")
    check_user_text(uid, lang, index, errors)
    return index


def check_messages(sid, s_index, msgs, index, errors):
    for j, m in enumerate(msgs):
        mid = m.get("message_id")
        if mid != f"{sid}_m{j + 1:03d}":
            errors.append(f"{sid}: message {j} has id {mid!r}")
        if m.get("role") not in ("user", "assistant"):
            errors.append(f"{mid}: bad role {m.get('role')!r}")
        content = m.get("content")
        if not isinstance(content, str) or not content.strip():
            errors.append(f"{mid}: empty content")
            content = ""
        if re.search(r"\{[a-z_0-9]+\}", content):
            errors.append(f"{mid}: unfilled template slot in {content!r}")
        if j and m.get("role") == "assistant" and msgs[j - 1].get("role") == "assistant":
            errors.append(f"{mid}: two assistant messages in a row")
        if mid in index:
            errors.append(f"{mid}: duplicate message id")
        index[mid] = (s_index, m.get("role"), content)


def check_user_text(uid, lang, index, errors):
    """Language tags must match the text; small talk and turn-taking must look like chat."""
    texts = [c for _, _, c in index.values()]
    if not texts:
        return
    with_cjk = sum(has_cjk(t) for t in texts) / len(texts)
    if lang == "zh" and with_cjk < 0.95:
        errors.append(f"{uid}: zh user but only {with_cjk:.0%} of messages contain Chinese")
    if lang == "en" and with_cjk > 0:
        errors.append(f"{uid}: en user but {with_cjk:.1%} of messages contain Chinese")
    if lang == "mixed":
        switched = sum(has_cjk(t) and 0.1 < cjk_share(t) < 0.9 and len(re.findall(r"[A-Za-z]{2,}", t)) >= 2
                       for t in texts) / len(texts)
        if not 0.15 <= with_cjk <= 0.85:
            errors.append(f"{uid}: mixed user but {with_cjk:.0%} of messages contain Chinese")
        if switched < 0.03:
            errors.append(f"{uid}: mixed user with only {switched:.1%} code-switched messages")
    user_texts = [c for _, r, c in index.values() if r == "user"]
    acks = sum(is_ack(t) for t in user_texts) / max(1, len(user_texts))
    if not ACK_SHARE[0] <= acks <= ACK_SHARE[1]:
        errors.append(f"{uid}: small-talk share of user turns {acks:.0%} outside {ACK_SHARE}")
    roles = [r for _, r, _ in index.values()]
    doubles = sum(a == b == "user" for a, b in zip(roles, roles[1:], strict=False)) / len(roles)
    if doubles > 0.1:
        errors.append(f"{uid}: {doubles:.0%} of turns are consecutive user messages")


# ------------------------------------------------------------------------------------------------ queries
def check_query(q: dict, users: dict, indexes: dict, errors: list[str]) -> None:
    qid = q.get("query_id")
    for field, typ in QUERY_FIELDS.items():
        if not isinstance(q.get(field), typ):
            errors.append(f"{qid}: field {field!r} missing or not {typ.__name__}")
            return
    uid = q["user_id"]
    if uid not in users:
        errors.append(f"{qid}: unknown user {uid!r}")
        return
    index = indexes[uid]
    text, lang = q["query"], q["lang"]
    if lang not in QUERY_LANGS:
        errors.append(f"{qid}: bad lang {lang!r}")
    elif (lang == "zh") != has_cjk(text):
        errors.append(f"{qid}: lang {lang!r} does not match query text {text[:60]!r}")
    if q["category"] not in CATEGORIES:
        errors.append(f"{qid}: bad category {q['category']!r}")
    if q["shape"] not in SHAPES:
        errors.append(f"{qid}: bad shape {q['shape']!r}")
    if q["fact_position"] not in POSITIONS:
        errors.append(f"{qid}: bad fact_position {q['fact_position']!r}")
    if q["asked_at_days_ago"] < 0:
        errors.append(f"{qid}: negative asked_at_days_ago")
    if not q["gold"]:
        errors.append(f"{qid}: empty gold")
    for mid in q["gold"] + q["hard_negatives"]:
        if mid not in index:
            errors.append(f"{qid}: id {mid!r} is not a message of {uid}")
    if set(q["gold"]) & set(q["hard_negatives"]):
        errors.append(f"{qid}: gold and hard negatives overlap")
    for cue in q["cue_terms"]:
        if not isinstance(cue, str) or cue.lower() not in text.lower():
            errors.append(f"{qid}: cue term {cue!r} does not occur in the query")
    golds = [index[m] for m in q["gold"] if m in index]
    if golds:
        check_gold(q, golds, len(users[uid]["sessions"]), errors)
    check_shape(q, errors)


def check_gold(q, golds, n_sessions, errors):
    qid = q["query_id"]
    s_index = golds[0][0]
    if q["fact_session_index"] != s_index:
        errors.append(f"{qid}: fact_session_index {q['fact_session_index']} but gold is in session {s_index}")
    if q["fact_position"] != fact_position(s_index, n_sessions):
        errors.append(f"{qid}: fact_position {q['fact_position']!r} inconsistent with session {s_index}/{n_sessions}")
    for _, _, content in golds:
        run = shared_run(q["query"], content, q["cue_terms"])
        if run:
            errors.append(f"{qid}: query shares {run!r} with its gold message (paraphrase rule)")
        if q["shape"] == "cross_lingual" and has_cjk(content) == (q["lang"] == "zh"):
            errors.append(f"{qid}: cross_lingual query in the same language as its gold message")


def check_shape(q, errors):
    qid, text = q["query_id"], q["query"]
    lines = text.split("\n")
    if q["shape"] == "dialogue":
        if not 2 <= len(lines) <= 4 or not all(DIALOGUE_LINE.match(ln) for ln in lines):
            errors.append(f"{qid}: dialogue query must be 2-4 'role: text' lines")
        elif not lines[-1].startswith("user: "):
            errors.append(f"{qid}: dialogue query must end with a user turn")
    elif len(lines) > 1:
        errors.append(f"{qid}: multi-line query with shape {q['shape']!r}")


def check_coverage(users: dict, queries: list[dict], indexes: dict, errors: list[str]) -> None:
    by_user = defaultdict(list)
    for q in queries:
        by_user[q.get("user_id")].append(q)
    langs = Counter(u["lang"] for u in users.values())
    for lang in sorted(USER_LANGS):
        if langs[lang] < MIN_USERS_PER_LANG:
            errors.append(f"only {langs[lang]} {lang} users (< {MIN_USERS_PER_LANG})")
        big = [u for u in users.values() if u["lang"] == lang and len(indexes[u["user_id"]]) >= BIG_MESSAGES
               and len(u["sessions"]) >= BIG_SESSIONS]
        if not big:
            errors.append(f"no {lang} user with >= {BIG_MESSAGES} messages over >= {BIG_SESSIONS} sessions")
    for uid, user in users.items():
        qs = by_user.get(uid, [])
        n = len(qs)
        if n < MIN_QUERIES:
            errors.append(f"{uid}: {n} queries < {MIN_QUERIES}")
            continue
        cats = Counter(q["category"] for q in qs)
        for cat in sorted(CATEGORIES):
            if cats[cat] < MIN_PER_CATEGORY:
                errors.append(f"{uid}: {cats[cat]} {cat} queries < {MIN_PER_CATEGORY}")
        shapes = Counter(q["shape"] for q in qs)
        for shape, share in MIN_SHAPE_SHARE.items():
            if shapes[shape] < share * n:
                errors.append(f"{uid}: {shapes[shape]}/{n} {shape} queries < {share:.0%}")
        if user["lang"] == "mixed" and shapes["cross_lingual"] < MIN_CROSS_SHARE_MIXED * n:
            errors.append(f"{uid}: {shapes['cross_lingual']}/{n} cross-lingual queries < 25%")
        if user["lang"] != "mixed" and shapes["cross_lingual"]:
            errors.append(f"{uid}: cross-lingual queries for a monolingual user")
        pos = Counter(q["fact_position"] for q in qs)
        for p in ("early", "late"):
            if pos[p] < MIN_POSITION_SHARE * n:
                errors.append(f"{uid}: {pos[p]}/{n} queries about {p} facts < {MIN_POSITION_SHARE:.0%}")
        with_neg = sum(bool(q["hard_negatives"]) for q in qs)
        if with_neg < MIN_HARD_NEGATIVE_SHARE * n:
            errors.append(f"{uid}: only {with_neg}/{n} queries have hard negatives")
    ids = [q.get("query_id") for q in queries]
    for qid, count in Counter(ids).items():
        if count > 1:
            errors.append(f"duplicate query id {qid!r}")


def validate(users: list[dict], queries: list[dict]) -> list[str]:
    """All problems found (an empty list means the benchmark is valid)."""
    errors: list[str] = []
    by_id: dict[str, dict] = {}
    for u in users:
        if u.get("user_id") in by_id:
            errors.append(f"duplicate user id {u.get('user_id')!r}")
        by_id[u.get("user_id")] = u
    indexes = {uid: check_user(u, errors) for uid, u in by_id.items()}
    device_owner: dict[str, str] = {}
    for uid, u in by_id.items():
        for s in u.get("sessions", []):
            owner = device_owner.setdefault(s.get("device_id"), uid)
            if owner != uid:
                errors.append(f"device id {s.get('device_id')!r} used by both {owner} and {uid}")
    for q in queries:
        check_query(q, by_id, indexes, errors)
    if not errors:
        check_coverage(by_id, queries, indexes, errors)
    return errors


# ------------------------------------------------------------------------------------------------ report
def summary(users: list[dict], queries: list[dict]) -> str:
    """Plain-text table: per-user sizes, then query counts per category/shape/lang/position."""
    lines = [f"{'user':<8}{'lang':<7}{'sessions':>9}{'messages':>10}{'user msgs':>10}{'small talk':>11}"
             f"{'queries':>9}"]
    qcount = Counter(q["user_id"] for q in queries)
    sizes = []
    for u in users:
        msgs = [m for s in u["sessions"] for m in s["messages"]]
        user_msgs = [m["content"] for m in msgs if m["role"] == "user"]
        acks = sum(is_ack(t) for t in user_msgs) / max(1, len(user_msgs))
        sizes.append(len(msgs))
        lines.append(f"{u['user_id']:<8}{u['lang']:<7}{len(u['sessions']):>9}{len(msgs):>10}{len(user_msgs):>10}"
                     f"{acks:>11.0%}{qcount[u['user_id']]:>9}")
    lines.append(f"users={len(users)}  messages total={sum(sizes)}  per user min/median/max="
                 f"{min(sizes)}/{statistics.median(sizes):g}/{max(sizes)}  queries={len(queries)}")
    user_lang = {u["user_id"]: u["lang"] for u in users}
    for field in ("category", "shape", "lang", "fact_position"):
        counts = Counter(q[field] for q in queries)
        lines.append(f"{field:<14}" + "  ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    counts = Counter(user_lang[q["user_id"]] for q in queries)
    lines.append(f"{'user lang':<14}" + "  ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    neg = sum(bool(q["hard_negatives"]) for q in queries)
    lines.append(f"queries with hard negatives: {neg}/{len(queries)}  "
                 f"assistant-turn gold: {sum(q.get('fact_role') == 'assistant' for q in queries)}  "
                 f"updated facts: {sum(bool(q.get('is_update')) for q in queries)}")
    return "\n".join(lines)


def load(data_dir: str) -> tuple[list[dict], list[dict]]:
    with open(os.path.join(data_dir, "conversations.json"), encoding="utf-8") as fh:
        users = json.load(fh)
    with open(os.path.join(data_dir, "queries.json"), encoding="utf-8") as fh:
        queries = json.load(fh)
    return users, queries


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: validate.py DIR", file=sys.stderr)
        return 2
    users, queries = load(argv[0])
    errors = validate(users, queries)
    print(summary(users, queries))
    if errors:
        print(f"\n{len(errors)} problem(s):")
        for e in errors[:200]:
            print(" -", e)
        return 1
    print("\nOK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
