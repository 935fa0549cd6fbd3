"""The gates extraction tries its patterns behind (``memory.gates``): a gate may only ever let through too
much, never keep out a text its pattern matches — a user's statement a gate kept out is a fact never
remembered. Checked on every built-in and default-vocabulary pattern over the bench conversations and the
long-history corpus (Chinese, English, mixed), in their own case and shouted, and on the characters
case-insensitive matching takes for one another."""

import re
import sys

import pytest

from bench.load import corpus, queries
from bench.longmem.generate import generate
from memory.claims import en, whole, zh
from memory.extraction import USER_RULES, extract
from memory.gates import Gates, fold, gate_of
from memory.models import Message, Role
from memory.text import clean
from memory.vocabulary import load_vocabulary

PATTERNS = ([rule.pattern for rule in USER_RULES] + [rule.pattern for rule in zh.RULES + en.RULES]
            + [pattern for pattern, _ in whole.MASTERY] + [rule.pattern for rule in load_vocabulary().rules])


def _texts() -> list[str]:
    users, _ = generate(7)
    said = [m["content"] for u in users for s in u["sessions"] for m in s["messages"] if m["role"] == "user"]
    plain = [text for _, text in corpus()] + queries() + said
    return plain + [t.upper() for t in plain] + [t.title() for t in plain] + [
        "I LIVE IN Berlin", "ı speak English", "İ have a daughter", "MY ſON is five", "my time zone is UTC+8",
        "I'M A TEACHER", "THANK YOU!", "我的GOAL是考上清华", "KEEP IT SHORT please", "sin^2x + cos^2x = 1",
        "请用微信联系我", "我住在上海，我的目标是学会游泳", "I work as a nurse, 我住在杭州"]


TEXTS = _texts()


def test_no_gate_keeps_out_a_text_its_pattern_matches():
    gates = Gates(PATTERNS)
    matched = 0
    for text in TEXTS:
        for pattern, admitted in zip(PATTERNS, gates.admitted(text), strict=True):
            if pattern.search(text):
                matched += 1
                assert admitted, (pattern.pattern, text)
    assert matched > 1_000  # the texts exercise the patterns: far more than a handful of matches


def test_most_texts_are_turned_away_from_most_patterns():
    """What the gates are for: a message is searched for a few patterns, not all of them."""
    gates = Gates(PATTERNS)
    tried = sum(sum(gates.admitted(text)) for text in TEXTS) / len(TEXTS)
    assert tried < len(PATTERNS) / 4, (tried, len(PATTERNS))


def test_a_pattern_that_needs_no_literal_is_always_tried():
    phone = re.compile(r"(\d{7,11})")
    anything = re.compile(r"(?i)(?:a|)b?")
    assert gate_of(phone) is None and gate_of(anything) is None
    assert Gates([phone, anything]).admitted("") == [True, True]


@pytest.mark.parametrize(("pattern", "needs"), [
    (r"我(?:住在|家在)\s*(\w+)", (("住在", "家在"), ())),
    (r"(?i)\bmy (?:job|occupation) is (\w+)", ((), (" is ",))),  # the longest run it cannot match without
    (r"(?:abc)?defg(\w)", (("defg",), ())),  # an optional part is not needed
    (r"(?i:I LIVE IN) ([A-Z]\w+)", ((), ("i live in",))),  # a case-insensitive part, folded
    (r"(?:xx|yyy)+z", (("xx", "yyy"), ())),  # a repeat needed at least once: one of its alternatives
])
def test_gate_of_reads_what_a_pattern_needs(pattern, needs):
    gate = gate_of(re.compile(pattern))
    assert gate is not None and (gate.exact, gate.folded) == needs


def test_fold_equates_what_case_insensitive_matching_equates():
    """Every character of the Basic Multilingual Plane that matches a gate's character under IGNORECASE
    folds to the same character (İ, ı, ſ, K, the Greek sigmas …), one for one."""
    plane = "".join(chr(c) for c in range(sys.maxunicode + 1) if c < 0x10000 and not 0xD800 <= c < 0xE000)
    needed = {ch for pattern in PATTERNS if (gate := gate_of(pattern)) for s in gate.folded for ch in s}
    for ch in needed | set("iskσμ"):
        for found in re.finditer(re.escape(ch), plane, re.IGNORECASE):
            assert fold(found.group()) == fold(ch), (ch, found.group())
    assert len(fold(plane)) == len(plane)


@pytest.mark.parametrize(("text", "expected"), [
    ("I LIVE IN Berlin", ("location", "Berlin")),
    ("MY NAME IS Alice", ("name", "Alice")),
    ("I work as a nurse, 我住在杭州", ("location", "杭州")),
])
def test_a_statement_in_any_case_is_remembered(text, expected):
    message = Message(tenant="t", user_id="u", session_id="s", message_id="m1", role=Role.user,
                      content=clean(text), client_ts=1.0)
    assert expected in {(f.relation, f.object) for f in extract(message).facts}
