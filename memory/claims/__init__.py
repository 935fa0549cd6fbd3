"""What a user says about themselves: beliefs from first-person declarative clauses, Chinese and English.

Precision first: a rule that is not sure makes nothing. A message is read sentence by sentence; a sentence is
passed over whole when it is a condition or hypothetical ("如果…", "when I'm stressed…", "I'd…") or reported
("they call me…", "我妈说…"), and quoted or fenced text is taken out. A clause that is a question is passed over
("我住在哪里？", "你知道我最喜欢去哪儿玩吗？"). The rest is tried clause by clause, each rule anchored on the speaker
— 我 / I / my at the clause's start, after a discourse marker — so "my brother is a doctor" (beyond the brother
himself), "I love your commitment" and "That's what I like to hear" make nothing; a Chinese clause without a
subject after one of the speaker's is the speaker's ("我今年17岁，喜欢物理").

Objects are whole phrases (``zh``: jieba's part-of-speech tagger; ``en``: the phrase up to a clause boundary),
never cut at a length and never a pronoun, deixis or question word: a rule that cannot read a whole phrase
makes nothing. One sentence can give several beliefs. Each belief names the rule ``family`` that made it; its
confidence is that family's measured precision (``rule.CONFIDENCE``). A deployment's own patterns (the
vocabulary file's ``rules``) are read through the same sentence gates and object checks.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

from memory.claims import en, whole, zh
from memory.claims.rule import Claim
from memory.models import EventType
from memory.vocabulary import Vocabulary

__all__ = ["Claim", "find"]

RULES = zh.RULES + en.RULES
_CJK = re.compile(r"[\u4e00-\u9fff]")
_QUOTED = re.compile(r"“[^”]*”|「[^」]*」|『[^』]*』|\"[^\"\n]*\"|```.*?```|`[^`\n]*`", re.S)
_EN_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])\.(?:\s+|$)")
_QUESTION = re.compile(
    r"[?？]\s*$|(?:吗|么)[\s。!！~]*$|什么|哪|谁|怎么|为什么|多少|几岁|几个|是不是|有没有|要不要|"
    r"^(?:do|does|did|is|are|am|was|were|can|could|would|will|should|shall|may|what|why|how|where|who|which|"
    r"whose|have|has)\b", re.I)
_ASKED = re.compile(r"[?？]\s*$|(?:吗|么)[\s。!！~]*$")
_CONDITION = re.compile(
    r"如果|要是|假如|假设|万一|的话|除非|一旦|每当|每次|当[^，。]{0,12}(?:时|的时候)|宁愿|宁可|"
    r"\b(?:if|whenever|unless|suppose|supposing|imagine|in case|wish|would|could|might|should|"
    r"i'd|i’d|i'll|i’ll|sometimes|when)\b", re.I)
_REPORTED = re.compile(
    r"(?:说|觉得|认为|以为)(?!话)|(?:他|她|他们|她们|别人|大家|人家|同学|朋友)\S{0,4}(?:叫|喊|称)我|"
    r"\b(?:says?|said|told|tells|think(?:s)?|thought|believes?|according to)\b|"
    r"\b(?:they|everyone|everybody|people|friends|he|she|kids|guys|folks|\w+s)\s+(?:all\s+|always\s+)?"
    r"call(?:s|ed)? me\b",
    re.I)
_CLAUSE = re.compile(r"[，、]|[,](?=\s+(?:i|my|but|and)\b|\s*[\u4e00-\u9fff])|\s+(?:but|and)\s+(?=i\b|my\b)", re.I)
_AND_VERB = re.compile(r"\s+and\s+(?=(?:\w+ly\s+)?(?:prefer|love|like|enjoy|dislike|hate|avoid)\b)", re.I)
_AND_STATE = re.compile(r"\s+and\s+(?=(?:\w+ly\s+)?(?:into|interested in|a (?:big |huge )?fan of)\b)", re.I)
_ZH_OTHERS = re.compile(r"^(?:他|她|它|你|您|我们|大家|别人|这|那|有人)")
_OTHER_SUBJECT = re.compile(r"^(?:他|她|它|你|您|我们|大家|别人|有人|(?:he|she|they|you|we|my \w+)\b)", re.I)
_ANSWER_OBJECT = re.compile(r"(?:回答|回复|讲解|answers?|responses?|replies|explanations?)$", re.I)


def sentences(text: str) -> Iterator[str]:
    """The sentences of a message that may state something of its speaker: quoted and fenced text taken out,
    conditions, hypotheticals and reported speech passed over."""
    text = _QUOTED.sub(" ", html.unescape(text))
    for chunk in re.split(r"(?<=[。！？!?；;\n])", text):
        for sentence in _EN_SENTENCE_END.split(chunk):
            sentence = sentence.strip()
            if sentence and not _CONDITION.search(sentence) and not _REPORTED.search(sentence):
                yield sentence


def clauses(sentence: str) -> Iterator[str]:
    """A sentence's clauses that are not questions, each as its speaker says it ("我今年17岁，喜欢物理" →
    "我今年17岁", "我喜欢物理"; "I'm 16 and really into robotics" → "I'm 16", "I'm really into robotics")."""
    sentence = _AND_STATE.sub(" and I'm ", _AND_VERB.sub(" and I ", sentence))
    asked = bool(_ASKED.search(sentence))
    parts = [p for p in _CLAUSE.split(sentence) if p.strip()]
    speaker = False
    for n, clause in enumerate(parts):
        clause = re.sub(r"[。！？!?；;~～…\s]+$", "", clause.strip())
        if not clause or _QUESTION.search(clause) or (asked and n == len(parts) - 1):
            speaker = False
            continue
        if _CJK.search(clause):
            bare = re.sub(rf"^{zh.LEAD}", "", clause)
            if bare.startswith("我"):
                speaker = not re.search(r"的.", bare)  # "我刚路过的那个商场，是…": the 商场 is the subject
            elif speaker and not _ZH_OTHERS.match(bare):
                clause = "我" + bare
        yield clause


def find(text: str, vocabulary: Vocabulary) -> list[Claim]:
    """Every belief ``text`` states about its speaker, each once (``vocabulary``'s own rules included; whether the
    deployment keeps a relation is the caller's question: the message is still of the claim's event type)."""
    found: dict[tuple[str, str], Claim] = {}

    def add(relation: str, obj: str, family: str, kind: EventType) -> None:
        if relation == "likes" and _ANSWER_OBJECT.search(obj):  # 我喜欢简短的回答: how to answer, not a like
            relation, family = "response_preference", "response"
        found.setdefault((relation, obj.lower()), Claim(relation, obj, family, kind))

    for sentence in sentences(text):
        for clause in clauses(sentence):
            for rule in RULES:  # both languages' on every clause: "I like 麻辣烫", "我是一名 software engineer"
                for match in rule.pattern.finditer(clause):
                    for obj in rule.read(match.group(1)):
                        add(rule.relation, obj, rule.family, rule.event_type)
            if not _OTHER_SUBJECT.match(re.sub(rf"^{zh.LEAD}", "", clause)):
                for pattern in whole.CONFUSIONS:
                    for match in pattern.finditer(clause):
                        for obj in (_concept(group) for group in match.groups() if group):
                            if obj:
                                add("learning_obstacle", obj, "obstacle", EventType.concept_confusion)
        for extra in vocabulary.rules:
            for match in extra.pattern.finditer(sentence):
                obj = (match.group(1) or "").strip()
                if obj and not zh.DEIXIS.match(obj) and not en.DEIXIS.match(obj):
                    add(extra.relation, obj, "vocabulary", extra.event_type)
    said = _QUOTED.sub(" ", html.unescape(text))
    for pattern, wish in whole.SHORT_ANSWERS:
        for match in pattern.finditer(said):
            if obj := wish or (match.group(1) or ""):
                add("response_preference", obj, "response", EventType.preference)
    for pattern, concept in whole.MASTERY:
        if pattern.search(said):
            add("mastery", concept, "mastery", EventType.statement)
    for relation, obj in list(found):  # "我不喜欢X" is not also "喜欢X"
        if relation == "likes" and ("dislikes", obj) in found:
            del found[relation, obj]
    if any(c.family == "location" for c in found.values()):  # 我是北京人，现在住在杭州: where they live
        found = {k: c for k, c in found.items() if c.family != "hometown"}
    return list(found.values())


def _concept(text: str) -> str:
    if _CJK.search(text):
        phrase = re.sub(r"(?:了|的|啊|呀|呢|吧)+$", "", text.strip())
        return phrase if zh.ok(phrase) else ""
    return next(iter(en.phrase(text)), "")
