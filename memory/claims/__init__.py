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
from functools import lru_cache

from memory.claims import en, whole, zh
from memory.claims.rule import Claim
from memory.gates import Gates
from memory.models import EventType
from memory.vocabulary import Vocabulary

__all__ = ["Claim", "find", "grounded"]

_EN_SPEAKER = re.compile(r"\b(?:i|my|me)\b|^(?:as an?|im)\b", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_QUOTED = re.compile(r"“[^”]*”|「[^」]*」|『[^』]*』|\"[^\"\n]*\"|```.*?```|`[^`\n]*`", re.S)
_EN_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])\.(?:\s+|$)")
_QUESTION = re.compile(
    r"[?？]\s*$|(?:吗|么)[\s。!！~]*$|什么|哪|谁|怎么|为什么|多少|几岁|几个|是不是|有没有|要不要|"
    r"^(?:do|does|did|is|are|am|was|were|can|could|would|will|should|shall|may|what|why|how|where|who|which|"
    r"whose|have|has)\b", re.I)
_ASKED = re.compile(r"[?？]\s*$|(?:吗|么)[\s。!！~]*$")
#: a condition, a hypothetical or a habit's occasion, and reported speech ("我妈说…", "they call me…"), Chinese
#: and English apart: each is searched only where its language's words are (and the English one only where one
#: of its words is: most sentences have none)
_ZH_NOT_OWN = re.compile(r"如果|要是|假如|假设|万一|的话|除非|一旦|每当|每次|当[^，。]{0,12}(?:时|的时候)|宁愿|宁可|"
                         r"(?:说|觉得|认为|以为)(?!话)|(?:他|她|他们|她们|别人|大家|人家|同学|朋友)\S{0,4}(?:叫|喊|称)我")
_EN_NOT_OWN = re.compile(
    r"\b(?:if|whenever|unless|suppose|supposing|imagine|in case|when|says?|said|told|tells|thinks?|thought|"
    r"believes?|according to)\b|(?<=\w )(?<!can )(?<!please )(?<!just )call(?:s|ed)? me\b", re.I)
_EN_NOT_OWN_WORDS = ("if", "when", "unless", "suppos", "imagin", "in case", "say", "said", "told", "tell", "think",
                     "thought", "believ", "according", "call")
#: a hypothetical or a wish is its own clause's ("Cycling doesn't appeal to me, and I'd rather not…": the first
#: clause stands)
_EN_MODAL = re.compile(r"\b(?:would|could|might|should|wish|i'd|i’d|i'll|i’ll|sometimes)\b", re.I)
_CLAUSE = re.compile(r"[，]|[,](?=\s+(?:i|my|but|and)\b|\s*[\u4e00-\u9fff])|\s+[-—–]\s+|"
                     r"\s+(?:but|and|since|because|so|as)\s+(?=i\b|my\b)", re.I)
_AND_VERB = re.compile(r"\s+and\s+(?=(?:\w+ly\s+)?(?:prefer|love|like|enjoy|dislike|hate|avoid)\b)", re.I)
_AND_STATE = re.compile(r"\s+and\s+(?=(?:\w+ly\s+)?(?:into|interested in|a (?:big |huge )?fan of)\b)", re.I)
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])")
_CLAUSE_END = re.compile(r"[。！？!?；;~～…\s]+$")
_ZH_LEAD = re.compile(rf"^{zh.LEAD}")
_EN_LEAD = re.compile(rf"^{en.LEAD}", re.I)
_ZH_OTHERS = re.compile(r"^(?:他|她|它|你|您|我们|大家|别人|这|那|有人)")
_OTHER_SUBJECT = re.compile(r"^(?:他|她|它|你|您|我们|大家|别人|有人|(?:he|she|they|you|we|my \w+)\b)", re.I)
_ANSWER_OBJECT = re.compile(r"(?:回答|回复|讲解|answers?|responses?|replies|explanations?)$", re.I)


def sentences(text: str, own: bool = True) -> Iterator[str]:
    """The sentences of a message that may state something of its speaker: quoted and fenced text taken out,
    conditions, hypotheticals and reported speech passed over (``own``; else only those)."""
    text = _QUOTED.sub(" ", html.unescape(text))
    for chunk in _SENTENCE_END.split(text):
        for sentence in _EN_SENTENCE_END.split(chunk):
            sentence = sentence.strip()
            if sentence and _not_own(sentence) != own:
                yield sentence


def _not_own(sentence: str) -> bool:
    """A condition, hypothetical or reported speech: nothing in it is the speaker's own plain word."""
    if _CJK.search(sentence) and _ZH_NOT_OWN.search(sentence):
        return True
    low = sentence.lower()
    return any(word in low for word in _EN_NOT_OWN_WORDS) and bool(_EN_NOT_OWN.search(sentence))


def clauses(sentence: str) -> Iterator[str]:
    """A sentence's clauses that are not questions, each as its speaker says it, without a discourse marker before
    it ("其实", "Honestly,"): "我今年17岁，喜欢物理" → "我今年17岁", "我喜欢物理"; "I'm 16 and really into robotics"
    → "I'm 16", "I'm really into robotics"."""
    sentence = _AND_STATE.sub(" and I'm ", _AND_VERB.sub(" and I ", sentence))
    asked = bool(_ASKED.search(sentence))
    parts = [p for p in _CLAUSE.split(sentence) if p.strip()]
    speaker = False
    for n, clause in enumerate(parts):
        clause = _CLAUSE_END.sub("", clause.strip())
        if not clause or _QUESTION.search(clause) or (asked and n == len(parts) - 1) or _EN_MODAL.search(clause):
            speaker = False
            continue
        clause = _EN_LEAD.sub("", _ZH_LEAD.sub("", clause))
        if _CJK.search(clause):
            if clause.startswith("我"):
                speaker = zh.speaks(clause)  # "我刚路过的那个商场，是…": the 商场 is the subject
            elif speaker and not _ZH_OTHERS.match(clause):
                clause = "我" + clause
        if clause:
            yield clause


def find(text: str, vocabulary: Vocabulary) -> list[Claim]:
    """Every belief ``text`` states about its speaker, each once (``vocabulary``'s own rules included; whether the
    deployment keeps a relation is the caller's question: the message is still of the claim's event type)."""
    found: dict[tuple[str, str], Claim] = {}
    # which patterns the message holds a string of (``memory.gates``): most messages hold none of most rules' words
    gates = iter(_gates(vocabulary).admitted(html.unescape(text)))
    confusions = [pattern for pattern in whole.CONFUSIONS if next(gates)]
    extras = [rule for rule in vocabulary.rules if next(gates)]
    wishes = [(pattern, wish) for pattern, wish in whole.SHORT_ANSWERS if next(gates)]
    shown = [(pattern, concept) for pattern, concept in whole.MASTERY if next(gates)]

    def add(relation: str, obj: str, family: str, kind: EventType) -> None:
        if relation == "likes" and _ANSWER_OBJECT.search(obj):  # 我喜欢简短的回答: how to answer, not a like
            relation, family = "response_preference", "response"
        found.setdefault((relation, obj.lower()), Claim(relation, obj, family, kind))

    for sentence in sentences(text):
        for clause in clauses(sentence):
            # every rule needs its speaker in the clause (我, I, my, me): a clause without one is tried on none;
            # one with both languages' is tried on both ("I like 麻辣烫", "我是一名 software engineer")
            for rule in (zh.RULES if "我" in clause else ()) + (en.RULES if _EN_SPEAKER.search(clause) else ()):
                for match in rule.pattern.finditer(clause):
                    for obj in rule.read(match.group(1)):
                        add(rule.relation, obj, rule.family, rule.event_type)
            if confusions and not _OTHER_SUBJECT.match(clause):
                for pattern in confusions:
                    for match in pattern.finditer(clause):
                        for obj in (_concept(group) for group in match.groups() if group):
                            if obj:
                                add("learning_obstacle", obj, "obstacle", EventType.concept_confusion)
        for extra in extras:
            for match in extra.pattern.finditer(sentence):
                obj = (match.group(1) or "").strip()
                if obj and not zh.DEIXIS.match(obj) and not en.DEIXIS.match(obj):
                    add(extra.relation, obj, "vocabulary", extra.event_type)
                    if extra.relation == "issue_history":  # "my headphones arrived cracked": they have them
                        add("product_owned", obj, "product", EventType.statement)
    for sentence in sentences(text, own=False):  # "My mom says I'm lazy": whatever she says, he has a mom
        for rule in (zh.KIN_RULE, en.KIN_RULE):
            for match in rule.pattern.finditer(sentence):
                for obj in rule.read(match.group(1)):
                    add(rule.relation, obj, rule.family, rule.event_type)
    said = _QUOTED.sub(" ", html.unescape(text))
    for pattern, wish in wishes:
        for match in pattern.finditer(said):
            if obj := wish or (match.group(1) or ""):
                add("response_preference", obj, "response", EventType.preference)
    for pattern, concept in shown:
        if pattern.search(said):
            add("mastery", concept, "mastery", EventType.statement)
    for relation, obj in list(found):  # "我不喜欢X" is not also "喜欢X"
        if relation == "likes" and ("dislikes", obj) in found:
            del found[relation, obj]
    if any(c.family == "location" for c in found.values()):  # 我是北京人，现在住在杭州: where they live
        found = {k: c for k, c in found.items() if c.family != "hometown"}
    return list(found.values())


@lru_cache(maxsize=8)
def _gates(vocabulary: Vocabulary) -> Gates:
    """The gates of the patterns ``find`` tries on a whole message or sentence, in its order: confusions', the
    vocabulary's, wishes about answers', mastery's (a clause's rules go by its speaker instead)."""
    return Gates(list(whole.CONFUSIONS) + [r.pattern for r in vocabulary.rules]
                 + [p for p, _ in whole.SHORT_ANSWERS] + [p for p, _ in whole.MASTERY])


def _concept(text: str) -> str:
    if _CJK.search(text):
        phrase = re.sub(r"(?:了|的|啊|呀|呢|吧)+$", "", text.strip())
        return phrase if zh.ok(phrase) else ""
    return next(iter(en.phrase(text)), "")


def grounded(text: str, relation: str, obj: str, single_valued: bool = False) -> str | None:
    """What a model's claim ``relation`` → ``obj`` about ``text``'s speaker may become, by the rules' own measure:
    the object as the text writes it, found inside a clause the rules would read (not a question, condition,
    quote or someone else's words), a whole phrase (not a pronoun, not a clause), an age a number the text says;
    None when it is not. A model's word is never taken for what the message does not say."""
    obj = html.unescape(obj).strip()
    if not obj:
        return None
    if relation == "age":
        said = zh.age(obj) or en.age(obj)
        if not said:
            return None
        obj = said[0]
    elif _CJK.search(obj):
        if not zh.ok(obj) or zh.DEIXIS.match(obj):
            return None
    elif not en.phrase(obj) or en.DEIXIS.match(obj):
        return None
    folded = obj.casefold()
    for sentence in sentences(text):
        for clause in clauses(sentence):
            at = clause.casefold().find(folded)
            if relation == "age":
                numbers = re.findall(r"\d{1,3}|[一二两三四五六七八九十]{1,3}", clause)
                if any(zh.age(n) == [obj] for n in numbers):
                    return obj
            elif at >= 0 and _whole(clause, at, len(obj)):
                return clause[at:at + len(obj)]
    return None


def _whole(clause: str, at: int, size: int) -> bool:
    """The span is not part of a longer Latin word ("aage" is not in "page"; Chinese has no spaces to check)."""
    before = clause[at - 1] if at > 0 else " "
    after = clause[at + size] if at + size < len(clause) else " "
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())
