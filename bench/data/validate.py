#!/usr/bin/env python3
"""Validate the Mneme retrieval benchmark data (stdlib only).

Usage: python3 bench/data/validate.py [data_dir]

Checks conversations.json and queries.json for structural integrity,
gold/hard-negative references, coverage targets (size, cross-lingual,
assistant-targeted, confusable), train/test split and a paraphrase rule
(no query may share a >=6-character run with any of its gold messages,
ignoring spaces/punctuation, case-insensitive). Prints counts; exits 1 on
any failure.
"""
import json
import os
import re
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = sys.argv[1] if len(sys.argv) > 1 else HERE

MIN_QUERIES = 170
MIN_CROSS = 40
MIN_ASSISTANT = 30
MIN_CONFUSABLE = 30
TRAIN_RATIO = (0.35, 0.45)
PARA_N = 6

USER_LANGS = {"zh", "en", "mixed"}
ROLES = {"user", "assistant"}
KINDS = {"fact", "confusion", "assistant_said", "plan", "preference", "event", "cross_lingual"}
SPLITS = {"train", "test"}

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
errors = []


def fail(msg):
    errors.append(msg)


def lang_of(text):
    """Coarse language: 'zh' if the text contains any CJK character, else 'en'."""
    return "zh" if CJK.search(text) else "en"


def norm(text):
    """Lower-case and drop whitespace, punctuation and underscores."""
    return re.sub(r"[\W_]+", "", text.lower())


def shared_run(query, gold, n=PARA_N):
    """Return the first n-char run of the normalised query found in the normalised gold."""
    q, g = norm(query), norm(gold)
    for i in range(len(q) - n + 1):
        if q[i:i + n] in g:
            return q[i:i + n]
    return None


def load(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return json.load(f)


conv = load("conversations.json")
queries = load("queries.json")

# ------------------------------------------------------------ conversations
msg_index = {}          # message_id -> (user_id, role, content)
user_ids = set()
session_ids = set()
n_sessions = n_messages = 0
user_lang = Counter()
role_count = Counter()

if not isinstance(conv, list):
    fail("conversations.json must be a list")
    conv = []

for u in conv:
    uid = u.get("user_id")
    if uid in user_ids:
        fail(f"duplicate user_id {uid}")
    user_ids.add(uid)
    if u.get("lang") not in USER_LANGS:
        fail(f"{uid}: bad lang {u.get('lang')!r}")
    user_lang[u.get("lang")] += 1
    sessions = u.get("sessions", [])
    if not 3 <= len(sessions) <= 5:
        fail(f"{uid}: {len(sessions)} sessions (want 3-5)")
    devices = {s.get("device_id") for s in sessions}
    if not 1 <= len(devices) <= 3:
        fail(f"{uid}: {len(devices)} devices (want 1-3)")
    prev_days = None
    for s in sessions:
        sid = s.get("session_id")
        n_sessions += 1
        if sid in session_ids:
            fail(f"duplicate session_id {sid}")
        session_ids.add(sid)
        if not str(sid).startswith(f"{uid}_s"):
            fail(f"{sid}: session id does not start with {uid}_s")
        d = s.get("days_ago")
        if not isinstance(d, int) or not 0 <= d <= 90:
            fail(f"{sid}: days_ago {d!r} out of range 0-90")
        elif prev_days is not None and d >= prev_days:
            fail(f"{sid}: days_ago {d} not smaller than previous session ({prev_days})")
        prev_days = d if isinstance(d, int) else prev_days
        msgs = s.get("messages", [])
        if not 8 <= len(msgs) <= 20:
            fail(f"{sid}: {len(msgs)} messages (want 8-20)")
        for m in msgs:
            mid = m.get("message_id")
            n_messages += 1
            if mid in msg_index:
                fail(f"duplicate message_id {mid}")
            if not str(mid).startswith(f"{sid}_m"):
                fail(f"{mid}: message id does not start with {sid}_m")
            if m.get("role") not in ROLES:
                fail(f"{mid}: bad role {m.get('role')!r}")
            if not isinstance(m.get("content"), str) or not m["content"].strip():
                fail(f"{mid}: empty content")
            role_count[m.get("role")] += 1
            msg_index[mid] = (uid, m.get("role"), m.get("content", ""))

# ------------------------------------------------------------ queries
query_ids = set()
kinds = Counter()
splits = Counter()
q_langs = Counter()
per_user_split = defaultdict(Counter)
n_cross = n_assistant = n_confusable = 0
para_fail = []

if not isinstance(queries, list):
    fail("queries.json must be a list")
    queries = []

for q in queries:
    qid = q.get("query_id")
    if qid in query_ids:
        fail(f"duplicate query_id {qid}")
    query_ids.add(qid)
    uid = q.get("user_id")
    text = q.get("query", "")
    if uid not in user_ids:
        fail(f"{qid}: unknown user_id {uid}")
    if not isinstance(text, str) or not text.strip():
        fail(f"{qid}: empty query")
        continue
    lang = q.get("lang")
    q_langs[lang] += 1
    if lang not in USER_LANGS:
        fail(f"{qid}: bad lang {lang!r}")
    elif (lang == "en") == bool(CJK.search(text)):
        fail(f"{qid}: lang {lang!r} inconsistent with text")
    kind = q.get("kind")
    kinds[kind] += 1
    if kind not in KINDS:
        fail(f"{qid}: bad kind {kind!r}")
    split = q.get("split")
    splits[split] += 1
    per_user_split[uid][split] += 1
    if split not in SPLITS:
        fail(f"{qid}: bad split {split!r}")

    gold = q.get("gold", [])
    if not isinstance(gold, list) or not 1 <= len(gold) <= 3:
        fail(f"{qid}: gold must list 1-3 ids")
        continue
    if len(set(gold)) != len(gold):
        fail(f"{qid}: duplicate gold ids")
    ok = True
    for g in gold:
        if g not in msg_index:
            fail(f"{qid}: gold {g} does not exist")
            ok = False
        elif msg_index[g][0] != uid:
            fail(f"{qid}: gold {g} belongs to {msg_index[g][0]}, not {uid}")
            ok = False
    if not ok:
        continue

    hn = q.get("hard_negatives", [])
    if hn:
        n_confusable += 1
        for h in hn:
            if h not in msg_index:
                fail(f"{qid}: hard negative {h} does not exist")
            elif msg_index[h][0] != uid:
                fail(f"{qid}: hard negative {h} belongs to another user")
            if h in gold:
                fail(f"{qid}: {h} is both gold and hard negative")

    gold_langs = {lang_of(msg_index[g][2]) for g in gold}
    if lang_of(text) not in gold_langs:
        n_cross += 1
    if kind == "cross_lingual" and lang_of(text) in gold_langs:
        fail(f"{qid}: kind cross_lingual but query language matches its gold")
    if any(msg_index[g][1] == "assistant" for g in gold):
        n_assistant += 1

    for g in gold:
        run = shared_run(text, msg_index[g][2])
        if run:
            para_fail.append(f"{qid}: shares '{run}' with {g}")

for p in para_fail:
    fail("paraphrase: " + p)

n_q = len(queries)
if n_q < MIN_QUERIES:
    fail(f"only {n_q} queries (want >= {MIN_QUERIES})")
if n_cross < MIN_CROSS:
    fail(f"only {n_cross} cross-lingual queries (want >= {MIN_CROSS})")
if n_assistant < MIN_ASSISTANT:
    fail(f"only {n_assistant} queries with assistant gold (want >= {MIN_ASSISTANT})")
if n_confusable < MIN_CONFUSABLE:
    fail(f"only {n_confusable} queries with hard negatives (want >= {MIN_CONFUSABLE})")
train_ratio = splits["train"] / n_q if n_q else 0
if not TRAIN_RATIO[0] <= train_ratio <= TRAIN_RATIO[1]:
    fail(f"train ratio {train_ratio:.2f} outside {TRAIN_RATIO}")
for uid in sorted(user_ids):
    if per_user_split[uid]["test"] == 0:
        fail(f"{uid}: no test queries")
    if per_user_split[uid]["train"] + per_user_split[uid]["test"] == 0:
        fail(f"{uid}: no queries at all")

# ------------------------------------------------------------ report
print(f"users: {len(user_ids)} ({dict(user_lang)})")
print(f"sessions: {n_sessions}  messages: {n_messages} ({dict(role_count)})")
print(f"queries: {n_q}  (langs {dict(q_langs)})")
print(f"  kinds: {dict(sorted(kinds.items()))}")
print(f"  split: train={splits['train']} test={splits['test']} (train ratio {train_ratio:.2f})")
print(f"  cross-lingual (query lang != gold lang): {n_cross}")
print(f"  gold includes an assistant message: {n_assistant}")
print(f"  with hard negatives (confusable neighbours): {n_confusable}")
print("  per user (train/test): " + ", ".join(
    f"{u} {per_user_split[u]['train']}/{per_user_split[u]['test']}" for u in sorted(user_ids)))

if errors:
    print(f"\nFAILED: {len(errors)} problem(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("\nOK")
