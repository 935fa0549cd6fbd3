"""Deterministic generator of long user/assistant histories with planted facts and paraphrased questions.

Usage:  python -m bench.longmem.generate --out DIR [--seed N]     (or: python bench/longmem/generate.py ...)
Import: from bench.longmem.generate import generate; users, queries = generate(seed=7)

Every user gets a persona, 20-40 sessions of topical small-talk-laden dialogue (see ``filler_en``/``filler_zh``),
and ~45 planted facts (``facts.SPECS``) spread over early, middle and late sessions, most with confusable
neighbours and some updated later.  Each fact yields one question whose gold is the answer-bearing message.
Only the standard library is used; all randomness flows from ``random.Random`` seeded per user.
"""

import argparse
import json
import math
import os
import random
import sys
import time

if __package__ in (None, ""):  # allow running as a script: python bench/longmem/generate.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "bench.longmem"

from . import vocab  # noqa: E402
from .facts import BI_SLOTS, SPECS  # noqa: E402
from .filler_en import SMALLTALK_EN, TOPICS_EN  # noqa: E402
from .filler_zh import CODESWITCH, SMALLTALK_ZH, TOPICS_ZH  # noqa: E402
from .textrules import fact_position, shared_run  # noqa: E402

# (user_id, lang, sessions, target messages, facts).  The first user of each group is the ~1,000-message one.
USER_PLANS = [
    ("zh01", "zh", 36, 1010, 52), ("zh02", "zh", 24, 580, 46), ("zh03", "zh", 22, 560, 44),
    ("zh04", "zh", 26, 620, 46), ("zh05", "zh", 23, 560, 44),
    ("en01", "en", 37, 1020, 52), ("en02", "en", 25, 600, 46), ("en03", "en", 22, 560, 44),
    ("en04", "en", 27, 640, 46), ("en05", "en", 21, 540, 44),
    ("mx01", "mixed", 38, 1030, 52), ("mx02", "mixed", 25, 600, 46), ("mx03", "mixed", 23, 570, 44),
    ("mx04", "mixed", 26, 620, 46),
]

TOPIC_WEIGHTS = {"work": 9, "coding": 9, "food": 8, "travel": 7, "fitness": 6, "health": 5, "shopping": 6,
                 "family": 7, "pets": 4, "finance": 4, "books": 4, "movies": 4, "study": 4, "home": 5}
BANKS = {"en": TOPICS_EN, "zh": TOPICS_ZH}
SMALLTALK = {"en": SMALLTALK_EN, "zh": SMALLTALK_ZH}
POSITION_SHARES = {"early": 0.25, "middle": 0.5, "late": 0.25}
P_ACK = 0.22
ASK_PREFIX = {"en": ["Quick question:", "Random q:", "Question for you:", "Hmm."],
              "zh": ["问一下，", "请教一下，", "话说，", "诶，", "emmm "]}
REPLY_OPENER = {"en": ["Good question. ", "Short version: ", "Happy to help. ", "That's a common one. "],
                "zh": ["好问题。", "简单说：", "这个挺常见的，", "嗯，"]}


# ------------------------------------------------------------------------------------------------ personas
PERSONA_PETS = {"en": ["Luna", "Charlie", "Oscar", "Rosie", "Buster"], "zh": ["旺财", "咪咪", "大黄", "球球", "毛毛"],
                "mixed": ["Lucky", "Mimi", "Oreo", "Bobo"]}


def make_persona(lang: str, rng: random.Random) -> dict:
    """People, pet, city, job and project of one user, rendered per language ({"en": {...}, "zh": {...}}).

    Names are shared across languages for bilingual users (English nicknames), so they work as cues either way.
    """
    if lang == "zh":
        female, male = rng.sample(vocab.ZH_FEMALE, 4), rng.sample(vocab.ZH_MALE, 5)
    elif lang == "en":
        female, male = rng.sample(vocab.EN_FEMALE, 4), rng.sample(vocab.EN_MALE, 5)
    else:
        female, male = rng.sample(vocab.MIXED_FEMALE, 4), rng.sample(vocab.MIXED_MALE, 5)
    people = {"sister": female[0], "friend": female[1], "coworker": female[2], "friend2": female[3],
              "partner": male[0], "brother": male[1], "cousin": male[2], "coworker2": male[3], "boss": male[4]}
    common = dict(people, project=rng.choice(vocab.PROJECTS), pet=rng.choice(PERSONA_PETS[lang]))
    if lang == "mixed":
        city, job, pet_kind = rng.choice(vocab.MIXED_CITIES), rng.choice(vocab.MIXED_JOBS), \
            rng.choice(vocab.PET_KINDS_MIXED)
        return {"en": dict(common, city=city[0], job=job[0], pet_kind=pet_kind[0]),
                "zh": dict(common, city=city[1], job=job[1], pet_kind=pet_kind[1])}
    return {lang: dict(common, city=rng.choice(vocab.CITIES[lang]), job=rng.choice(vocab.JOBS[lang]),
                       pet_kind=rng.choice(vocab.PET_KINDS[lang]))}


class Slots(dict):
    """format_map mapping: persona and fixed slots first, anything else drawn at random from the vocab pools."""

    def __init__(self, base: dict, pool_lang: str, rng: random.Random):
        super().__init__(base)
        self.pools = vocab.SLOT_POOLS[pool_lang]
        self.rng = rng

    def __missing__(self, key):
        return self.rng.choice(self.pools[key])


def fill(template: str, lang: str, persona: dict, rng: random.Random, extra: dict | None = None,
         pool_lang: str | None = None) -> str:
    base = dict(persona[lang if lang in persona else next(iter(persona))])
    base.update(extra or {})
    return template.format_map(Slots(base, pool_lang or lang, rng))


# ------------------------------------------------------------------------------------------------ sessions
def session_days(n: int, rng: random.Random) -> list[int]:
    """Strictly decreasing days_ago: first session up to 400 days back, the last a few days ago."""
    first, last = rng.randint(300, 400), rng.randint(1, 5)
    middle = sorted(rng.sample(range(last + 1, first), n - 2), reverse=True)
    return [first, *middle, last]


def session_sizes(n: int, total: int, rng: random.Random) -> list[int]:
    """Per-session message targets in [6, 40] that add up to ``total``; ~15% of sessions are short check-ins."""
    sizes = [rng.randint(6, 12) if rng.random() < 0.15 else rng.randint(16, 40) for _ in range(n)]
    while sum(sizes) < total:
        i = rng.randrange(n)
        if sizes[i] < 38:
            sizes[i] += 1
    while sum(sizes) > total:
        i = rng.randrange(n)
        if sizes[i] > 8:
            sizes[i] -= 1
    return sizes


def session_langs(lang: str, n: int, rng: random.Random) -> list[str]:
    """zh/en users speak one language; bilingual users alternate zh, en and code-switched ("cs") sessions."""
    if lang != "mixed":
        return [lang] * n
    langs = [rng.choices(["zh", "en", "cs"], [0.35, 0.3, 0.35])[0] for _ in range(n)]
    langs[:3] = ["zh", "en", "cs"]  # every bilingual user has at least one of each
    rng.shuffle(langs)
    return langs


def session_topics(size: int, rng: random.Random) -> list[str]:
    k = 1 if size < 14 else rng.choice([1, 2, 2]) if size < 26 else rng.choice([2, 3])
    topics = list(TOPIC_WEIGHTS)
    picked = []
    while len(picked) < k:
        t = rng.choices(topics, [TOPIC_WEIGHTS[x] for x in topics])[0]
        if t not in picked:
            picked.append(t)
    return picked


# ------------------------------------------------------------------------------------------------ facts
def pick_specs(n: int, rng: random.Random) -> list[dict]:
    """All assistant-side specs (so ~15% of facts live in assistant turns) plus a category-balanced sample."""
    chosen = [s for s in SPECS if s["who"] == "assistant"]
    rest = [s for s in SPECS if s["who"] == "user"]
    rng.shuffle(rest)
    by_cat: dict[str, list] = {}
    for s in rest:
        by_cat.setdefault(s["cat"], []).append(s)
    while len(chosen) < n:  # round-robin over categories keeps every category well represented
        for cat in sorted(by_cat):
            if by_cat[cat] and len(chosen) < n:
                chosen.append(by_cat[cat].pop())
    return chosen


def position_plan(n_facts: int, rng: random.Random) -> list[str]:
    plan = []
    for pos, share in POSITION_SHARES.items():
        plan += [pos] * round(n_facts * share)
    plan = (plan + ["middle"] * n_facts)[:n_facts]
    rng.shuffle(plan)
    return plan


def sessions_in(position: str, n: int) -> list[int]:
    return [i for i in range(n) if fact_position(i, n) == position]


def choose_session(candidates, topic, lang, plan, load, rng, avoid=()):
    """Prefer a session that already talks about the topic, in the right language, with few planted items."""
    def score(i):
        s = plan[i]
        return (2 * (topic in s["topics"]) + (s["lang"] in (lang, "cs")) - 0.7 * load[i] + rng.random())
    options = [i for i in candidates if i not in avoid] or list(candidates)
    return max(options, key=score)


def instantiate(spec: dict, user_lang: str, persona: dict, rng: random.Random) -> dict:
    """Fix a fact's language, cue slots and values."""
    slots = {name: rng.choice(BI_SLOTS[name]) for name in spec["slots"]}
    return {"spec": spec, "slots": slots, "lang": user_lang if user_lang != "mixed" else None, "persona": persona}


def slot_view(fact: dict, lang: str) -> dict:
    i = 0 if lang == "en" else 1
    return {name: pair[i] for name, pair in fact["slots"].items()}


def render(fact: dict, field: str, lang: str, rng: random.Random) -> str:
    spec = fact["spec"]
    extra = dict(slot_view(fact, lang), **fact["values"])
    return fill(rng.choice(spec[field][lang]), lang, fact["persona"], rng, extra)


def plant_facts(specs, user_lang, persona, plan, rng):
    """Decide where every fact, its outdated version and its neighbours go; returns fact records."""
    n = len(plan)
    load = [0] * n
    facts = []
    for spec, pos in zip(specs, position_plan(len(specs), rng), strict=True):
        fact = instantiate(spec, user_lang, persona, rng)
        if spec["old"] and pos == "early":  # an update needs room before it
            pos = rng.choice(["middle", "late"])
        candidates = sessions_in(pos, n)
        if spec["old"]:
            candidates = [i for i in candidates if i >= 2] or candidates
        lang_hint = fact["lang"] or rng.choice(["zh", "en"])
        idx = choose_session(candidates, spec["topic"], lang_hint, plan, load, rng)
        fact["lang"] = fact["lang"] or (plan[idx]["lang"] if plan[idx]["lang"] != "cs" else lang_hint)
        fact["values"] = spec["make"](rng, fact["lang"], fact["slots"])
        fact["alts"] = distinct_alts(spec, fact, rng)
        fact["session"] = idx
        fact["position"] = fact_position(idx, n)
        placements = [("fact", idx)]
        load[idx] += 1
        if spec["old"]:
            old_idx = choose_session(range(0, max(1, idx - 1)), spec["topic"], fact["lang"], plan, load, rng)
            placements.append(("old", old_idx))
            load[old_idx] += 1
        if spec["nb"] and rng.random() < 0.85:  # one neighbour per distinct template (no self-contradictions)
            for _ in range(min(rng.choice([1, 2, 2]), len(spec["nb"][fact["lang"]]))):
                nb_idx = choose_session(range(n), spec["topic"], fact["lang"], plan, load, rng,
                                        avoid={p[1] for p in placements})
                placements.append(("nb", nb_idx))
                load[nb_idx] += 1
        fact["placements"] = placements
        facts.append(fact)
    return facts


def distinct_alts(spec: dict, fact: dict, rng: random.Random, k: int = 2) -> list[str]:
    """Neighbour values: different from the fact's value (and its old value) and from each other."""
    taken = {fact["values"].get("value"), fact["values"].get("old")}
    alts = []
    for _ in range(40):
        alt = spec["make"](rng, fact["lang"], fact["slots"]).get("alt")
        if alt not in taken:
            alts.append(alt)
            taken.add(alt)
        if len(alts) == k:
            break
    return alts or [fact["values"].get("alt")]


def planted_block(fact: dict, kind: str, rng: random.Random) -> list[dict]:
    """Messages that carry a fact, its outdated version or a neighbour, with the surrounding turn."""
    spec, lang = fact["spec"], fact["lang"]
    bank = BANKS[lang][spec["topic"]]
    if kind == "fact" and spec["who"] == "assistant":
        marked = {"role": "assistant", "content": render(fact, "fact", lang, rng), "mark": (id(fact), kind)}
        return [{"role": "user", "content": render(fact, "lead", lang, rng)}, marked]
    if kind == "nb":  # each neighbour gets its own different specific
        fact["values"]["alt"] = fact["alts"][fact.setdefault("nb_count", 0) % len(fact["alts"])]
        fact["nb_count"] += 1
    if kind == "nb":
        k = fact["nb_count"] - 1
        text = fill(spec["nb"][lang][k % len(spec["nb"][lang])], lang, fact["persona"], rng,
                    dict(slot_view(fact, lang), **fact["values"]))
    else:
        text = render(fact, kind, lang, rng)
    if kind == "fact":
        replies = (spec["reply"] or {}).get(lang) or bank["reacts"]
    else:  # neighbours and outdated values get a neutral reaction: fact- and topic-specific ones may not fit
        replies = SMALLTALK[lang]["noted"]
    return [{"role": "user", "content": text, "mark": (id(fact), kind)},
            {"role": "assistant", "content": rng.choice(replies)}]


# ------------------------------------------------------------------------------------------------ filler
class Decks:
    """Shuffled decks of exchange templates per (language, topic): no template repeats until a deck runs out."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.decks: dict[tuple, list] = {}
        self.recent: dict[tuple, list] = {}

    def draw(self, key: tuple, items: list):
        deck = self.decks.get(key)
        if not deck:
            recent = self.recent.get(key, [])
            deck = [i for i in range(len(items)) if i not in recent]
            self.rng.shuffle(deck)
            deck = recent[::-1] + deck  # the last few drawn go to the bottom: no repeats across a reshuffle
            self.decks[key] = deck
        pick = deck.pop()
        self.recent[key] = (self.recent.get(key, []) + [pick])[-6:]
        return items[pick]


def exchange(topic: str, lang: str, persona: dict, decks: Decks, rng: random.Random) -> list[dict]:
    """One user turn and the assistant's reply (1-4 sentences) on a topic; lang "cs" = code-switched."""
    if lang == "cs":
        if topic in CODESWITCH and rng.random() < 0.75:
            user, reply = decks.draw(("cs", topic), CODESWITCH[topic])
            return [{"role": "user", "content": fill(user, "zh", persona, rng, pool_lang="en")},
                    {"role": "assistant", "content": fill(reply, "zh", persona, rng, pool_lang="en")}]
        lang = rng.choice(["zh", "en"])
    bank = BANKS[lang][topic]
    user, reply = decks.draw((lang, topic), bank["pairs"])
    extras = rng.sample(bank["extras"], rng.choice([0, 0, 0, 1, 1, 2]))
    sep = " " if lang == "en" else ""
    reply = sep.join([reply, *extras])
    if rng.random() < 0.12:  # light, natural variation so repeated templates do not read identically
        user = with_prefix(rng.choice(ASK_PREFIX[lang]), user, lang)
    if user.rstrip().endswith(("?", "？")) and rng.random() < 0.2:
        reply = rng.choice(REPLY_OPENER[lang]) + reply
    return [{"role": "user", "content": fill(user, lang, persona, rng)},
            {"role": "assistant", "content": fill(reply, lang, persona, rng)}]


def talk_lang(session_lang: str, user_lang: str, rng: random.Random) -> str:
    """Language of a small-talk turn; bilingual users sometimes drift into the other language."""
    if session_lang == "cs":
        return rng.choice(["zh", "en"])
    if user_lang == "mixed" and rng.random() < 0.12:
        return "en" if session_lang == "zh" else "zh"
    return session_lang


def smalltalk(kind: str, lang: str, rng: random.Random) -> str:
    return rng.choice(SMALLTALK[lang][kind])


def with_prefix(prefix: str, text: str, lang: str) -> str:
    return f"{prefix} {text}" if lang == "en" else prefix + text


def build_session(spec: dict, planted: list[list[dict]], user_lang, persona, decks, rng) -> list[dict]:
    """Greeting, topic segments of exchanges (planted blocks slotted in), acknowledgements, optional goodbye."""
    s_lang, size = spec["lang"], spec["size"]
    blocks: list[list[dict]] = []
    if rng.random() < 0.45:
        lang = talk_lang(s_lang, user_lang, rng)
        blocks.append([{"role": "user", "content": smalltalk("greet", lang, rng), "no_ack": True},
                       {"role": "assistant", "content": smalltalk("greet_reply", lang, rng)}])
    room = size - 2 * len(planted) - 2 * len(blocks) - 0.6
    budget = max(1, round(room / (2 + 1.7 * P_ACK)))
    topics = list(spec["topics"])
    per_topic = _split(budget, len(topics), rng)
    for block in planted:  # a planted fact on another topic gets its own short segment
        if block[0]["topic"] not in topics:
            topics.append(block[0]["topic"])
            per_topic.append(1)
    for t_index, topic in enumerate(topics):
        seg = [exchange(topic, _turn_lang(s_lang, user_lang, rng), persona, decks, rng)
               for _ in range(per_topic[t_index])]
        for block in (b for b in planted if b[0]["topic"] == topic):  # never open a segment with a planted turn
            seg.insert(rng.randint(1, len(seg)) if seg else 0, block)
        if t_index and seg and rng.random() < 0.6:
            lang = "en" if _is_en(seg[0][0]["content"]) else "zh"
            seg[0][0]["content"] = with_prefix(smalltalk("shift", lang, rng), seg[0][0]["content"], lang)
        blocks += seg
    while sum(len(b) for b in blocks) < 6:
        blocks.append(exchange(topics[0], _turn_lang(s_lang, user_lang, rng), persona, decks, rng))
    blocks = _with_acks(blocks, s_lang, user_lang, rng)
    if rng.random() < 0.3:
        lang = talk_lang(s_lang, user_lang, rng)
        blocks.append([{"role": "user", "content": smalltalk("bye", lang, rng)},
                       {"role": "assistant", "content": smalltalk("bye_reply", lang, rng)}])
    return _fit(blocks, rng)


def _turn_lang(s_lang: str, user_lang: str, rng: random.Random) -> str:
    """Bilingual users' zh/en sessions also carry a few turns in the other language or code-switched."""
    if user_lang == "mixed" and s_lang != "cs":
        roll = rng.random()
        if roll < 0.1:
            return "en" if s_lang == "zh" else "zh"
        if roll < 0.2:
            return "cs"
    return s_lang


def _is_en(text: str) -> bool:
    return not any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _split(total: int, k: int, rng: random.Random) -> list[int]:
    cuts = sorted(rng.sample(range(1, total), k - 1)) if total > k else list(range(1, k))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def _with_acks(blocks, s_lang, user_lang, rng):
    """After some assistant replies the user just says thanks/ok; sometimes the ack runs into a new question."""
    out = []
    for i, block in enumerate(blocks):
        out.append(block)
        if rng.random() >= P_ACK or block[-1]["role"] != "assistant" or block[0].get("no_ack"):
            continue
        lang = talk_lang(s_lang, user_lang, rng)
        kind = rng.choice(["thanks", "ack", "ack"])
        ack = {"role": "user", "content": smalltalk(kind, lang, rng)}
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        if nxt and nxt[0]["role"] == "user" and rng.random() < 0.3:
            out.append([ack])  # two user messages in a row: "ok cool" then the next question
        else:
            out.append([ack, {"role": "assistant", "content": smalltalk(kind + "_reply", lang, rng)}])
    return out


def _fit(blocks, rng):
    """Keep a session within 6-40 messages by dropping filler blocks (planted blocks are never dropped)."""
    def count():
        return sum(len(b) for b in blocks)
    while count() > 40:
        droppable = [i for i, b in enumerate(blocks) if not any("mark" in m for m in b)]
        blocks.pop(rng.choice(droppable))
    return [m for b in blocks for m in b]


# ------------------------------------------------------------------------------------------------ queries
def when_phrase(days: int, lang: str) -> str:
    """Relative time expression for a past session, resolvable against asked_at_days_ago."""
    zh_num = ["零", "一", "两", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二"]
    if days <= 9:
        return "a few days ago" if lang == "en" else "前几天"
    if days <= 16:
        return "last week" if lang == "en" else "上周"
    if days <= 24:
        return "a couple of weeks ago" if lang == "en" else "两周前"
    if days <= 45:
        return "last month" if lang == "en" else "上个月"
    if days >= 330:
        return "about a year ago" if lang == "en" else "差不多一年前"
    months = round(days / 30)
    return f"about {months} months ago" if lang == "en" else f"大概{zh_num[months]}个月前"


TEMPORAL = {"en": ["{when}, I told you about this — {q}", "Thinking back to {when}: {q}",
                   "Something from our chat {when}. {q}"],
            "zh": ["{when}我跟你说过，{q}", "记得{when}聊到过，{q}", "{when}提过一次的，{q}"]}
DIALOGUE_CONNECT = {"en": ["Anyway — {q}", "Oh, and {q}", "Related question: {q}", "Hmm, also: {q}"],
                    "zh": ["对了，{q}", "说到这个，{q}", "另外，{q}", "哦对，{q}"]}


def dialogue_wrap(q: str, topic: str, lang: str, persona, decks, rng) -> str:
    """2-4 turns of recent, on-theme dialogue; only the last user turn carries the real cue."""
    ex = exchange(topic, lang, persona, decks, rng)
    last = rng.choice(DIALOGUE_CONNECT[lang]).format(q=q)
    shape = rng.choice(["ua", "a", "aua"])
    turns = []
    if shape == "ua":
        turns = [("user", ex[0]["content"]), ("assistant", ex[1]["content"])]
    elif shape == "a":
        turns = [("assistant", ex[1]["content"])]
    else:
        ex2 = exchange(topic, lang, persona, decks, rng)
        turns = [("assistant", ex2[1]["content"]), ("user", ex[0]["content"]), ("assistant", ex[1]["content"])]
    turns.append(("user", last))
    return "\n".join(f"{role}: {text}" for role, text in turns)


def lower_question(q: str) -> str:
    """"Which ..." -> "which ..." when the question follows a lead-in; names and "I" keep their capital."""
    first = q.split(" ", 1)[0]
    return q[0].lower() + q[1:] if first in QUESTION_WORDS else q


QUESTION_WORDS = {"What", "What's", "Which", "Who", "Who's", "Where", "When", "When's", "How", "Remind"}


def make_query(fact, shape, q_lang, gold_text, days_ago, decks, rng):
    """Render a paraphrased question that passes the shared-run rule; raises if the bank cannot."""
    spec = fact["spec"]
    extra = slot_view(fact, q_lang)
    cues = [fill(c, q_lang, fact["persona"], rng, extra) for c in spec["cue"]]
    templates = list(spec["q"][q_lang])
    rng.shuffle(templates)
    for attempt in range(30):
        q = fill(templates[attempt % len(templates)], q_lang, fact["persona"], rng, extra)
        if shape == "temporal":
            q = rng.choice(TEMPORAL[q_lang]).format(when=when_phrase(days_ago, q_lang), q=lower_question(q))
            q = q[0].upper() + q[1:]
        elif shape == "dialogue":
            q = dialogue_wrap(lower_question(q), spec["topic"], q_lang, fact["persona"], decks, rng)
        if shared_run(q, gold_text, cues) is None:
            return q, [c for c in cues if c.lower() in q.lower()]
    raise ValueError(f"no paraphrase of {spec['key']!r} ({q_lang}) passes the shared-run rule: {q!r} / {gold_text!r}")


def shape_plan(n: int, user_lang: str, rng: random.Random) -> list[str]:
    shares = {"dialogue": 0.15, "temporal": 0.15}
    if user_lang == "mixed":
        shares["cross_lingual"] = 0.35
    plan = [shape for shape, share in shares.items() for _ in range(math.ceil(n * share))]
    plan = (plan + ["plain"] * n)[:n]
    rng.shuffle(plan)
    return plan


# ------------------------------------------------------------------------------------------------ users
def build_user(user_id: str, lang: str, n_sessions: int, n_messages: int, n_facts: int, seed: int):
    rng = random.Random(f"{seed}:{user_id}")
    persona = make_persona(lang, rng)
    sizes = session_sizes(n_sessions, n_messages, rng)
    plan = [{"size": size, "lang": s_lang, "topics": session_topics(size, rng)}
            for size, s_lang in zip(sizes, session_langs(lang, n_sessions, rng), strict=True)]
    facts = plant_facts(pick_specs(n_facts, rng), lang, persona, plan, rng)
    planted: list[list] = [[] for _ in range(n_sessions)]
    for fact in facts:
        for kind, idx in fact["placements"]:
            block = planted_block(fact, kind, rng)
            block[0]["topic"] = fact["spec"]["topic"]
            planted[idx].append(block)
    decks = Decks(rng)
    days = session_days(n_sessions, rng)
    devices = [f"{user_id}_phone", f"{user_id}_laptop"] + ([f"{user_id}_tablet"] if rng.random() < 0.5 else [])
    sessions, marks = [], {}
    for i, spec in enumerate(plan):
        msgs = build_session(spec, planted[i], lang, persona, decks, rng)
        sid = f"{user_id}_s{i + 1:02d}"
        out = []
        for j, m in enumerate(msgs):
            mid = f"{sid}_m{j + 1:03d}"
            if "mark" in m:
                marks.setdefault(m["mark"], []).append((mid, m["content"], i))
            out.append({"message_id": mid, "role": m["role"], "content": m["content"]})
        sessions.append({"session_id": sid, "device_id": rng.choices(devices, [5, 3, 1][:len(devices)])[0],
                         "days_ago": days[i], "messages": out})
    user = {"user_id": user_id, "lang": lang, "sessions": sessions}
    queries = build_queries(user_id, lang, facts, marks, days, decks, rng)
    return user, queries


def build_queries(user_id, lang, facts, marks, days, decks, rng):
    queries = []
    for k, (fact, shape) in enumerate(zip(facts, shape_plan(len(facts), lang, rng), strict=True)):
        key = id(fact)
        (gold_id, gold_text, s_idx), = marks[(key, "fact")]
        negatives = [mid for kind in ("old", "nb") for mid, _, _ in marks.get((key, kind), [])]
        q_lang = fact["lang"]
        if shape == "cross_lingual":
            q_lang = "en" if fact["lang"] == "zh" else "zh"
        text, cues = make_query(fact, shape, q_lang, gold_text, days[s_idx], decks, rng)
        queries.append({"query_id": f"{user_id}_q{k + 1:02d}", "user_id": user_id, "query": text, "lang": q_lang,
                        "gold": [gold_id], "hard_negatives": negatives, "category": fact["spec"]["cat"],
                        "shape": shape, "fact_session_index": s_idx, "fact_position": fact["position"],
                        "cue_terms": cues, "asked_at_days_ago": 0, "fact_key": fact["spec"]["key"],
                        "fact_role": fact["spec"]["who"], "is_update": bool(fact["spec"]["old"])})
    return queries


def generate(seed: int = 7) -> tuple[list[dict], list[dict]]:
    """Build all users and queries; identical output for identical seeds."""
    users, queries = [], []
    for plan in USER_PLANS:
        user, qs = build_user(*plan, seed=seed)
        users.append(user)
        queries += qs
    return users, queries


def write(out_dir: str, users: list[dict], queries: list[dict]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for name, data in (("conversations.json", users), ("queries.json", queries)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    users, queries = generate(args.seed)
    write(args.out, users, queries)
    n_msgs = sum(len(s["messages"]) for u in users for s in u["sessions"])
    print(f"{len(users)} users, {n_msgs} messages, {len(queries)} queries -> {args.out} "
          f"({time.perf_counter() - start:.1f}s)")


if __name__ == "__main__":
    main()
