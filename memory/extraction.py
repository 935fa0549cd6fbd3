"""Rule extraction, Chinese and English: one message → typed events (at least one) + relation facts.

Every message becomes at least one event so nothing said is unsearchable: a user message that no
rule types is a ``statement``; an assistant reply is a ``plan`` when it gives steps, else a ``statement``.

The facts are what the user's message states about the user (``memory.claims``: precision first, only the
relations the deployment's vocabulary keeps); each one types the message too (an age is an
``age_declaration``, a like a ``preference``). The rules here (``USER_RULES``) type what states no belief:
requests, failures, feedback, greetings, small talk, questions.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NotRequired, TypedDict

from memory import claims, ids
from memory.gates import Gates
from memory.models import Event, EventType, Extraction, Fact, Message, Role
from memory.text import keywords, sha256, summary, tokenize
from memory.vocabulary import Vocabulary, load_vocabulary


@dataclass(frozen=True)
class Rule:
    """Where ``pattern`` matches a user's message, the message is an event of ``event_type``."""

    event_type: EventType
    pattern: re.Pattern[str]
    confidence: float = 0.8


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


USER_RULES: tuple[Rule, ...] = (
    # explicit requests to the agent
    Rule(EventType.request, _rx(r"^(?:请你?|麻烦你?|能不能|可不可以|你能不能|以后|下次)(.{1,40})")),
    Rule(EventType.request, _rx(r"(?:^|[，。,.]\s*)(?:别|不要)(再?.{1,30})")),
    Rule(EventType.request, _rx(r"^(?:please|can you|could you|would you|from now on)\b\s*(.{1,60})")),
    # failures and feedback
    Rule(EventType.operation_failure, _rx(r"(打不开|没反应|报错|崩溃了|闪退|失败了|出错了|用不了)")),
    Rule(EventType.operation_failure,
         _rx(r"\b(doesn't work|does not work|crashed|crashes|not working|won't load|keeps failing)\b")),
    Rule(EventType.feedback,
         _rx(r"((?:这个|你的)?(?:解释|回答|例子|方法)(?:很|真|太|不太|不)?(?:好|棒|清楚|有用|没用|有帮助)|谢谢|懂了|明白了)")),
    Rule(EventType.feedback,
         _rx(r"\b(thanks|thank you|that helps|that helped|that didn't help|makes sense|got it)\b")),
)

_GREETING = _rx(r"^(?:你好|您好|嗨|哈喽|早上好|晚上好|下午好|早安|hi|hello|hey|good (?:morning|evening|afternoon))"
                r"[\s!！。,.，~]*(?:呀|啊)?[\s!！。,.，~]*$")
_SMALL_TALK = _rx(r"^(?:哈哈+|嗯+|好的|好吧|ok(?:ay)?|lol|haha+|cool|nice|嘿嘿|呵呵|行)[\s!！。,.，~]*$")
_QUESTION = _rx(r"[?？]|^(?:what|why|how|when|where|who|which|is|are|do|does|can|could)\b|(?:吗|呢)[。!！]?$|"
                r"为什么|怎么|什么|如何|哪|区别|多少")
#: Whether a message says anything about its writer: a question that does not ("what's a good dinner
#: idea?") asks the assistant something and is a weak memory of the user (``IMPERSONAL_QUESTION_WEIGHT``).
_FIRST_PERSON = _rx(r"\b(?:i|i'm|i've|i'd|i'll|im|my|me|mine|myself|we|we're|our|us)\b|我|咱|俺")
IMPERSONAL_QUESTION_WEIGHT = 0.7
_PLAN = _rx(r"第[一二三1-3]步|步骤|首先.{0,40}然后|^\s*1[.、)]|\bstep 1\b|\bfirst,.{0,80}\bthen\b")


def extract(message: Message, vocabulary: Vocabulary | None = None) -> Extraction:
    """All events and facts the rules find in one message; never an empty event list. Rules read the
    plain text (stored text is HTML-escaped: "R&amp;D" must not end a claim at its ';'), and facts hold
    plain text too: they are data, escaped by whoever renders them. ``vocabulary``: the deployment's (None: the
    default file's)."""
    vocabulary = vocabulary or load_vocabulary()
    text = html.unescape(message.content)
    found: dict[EventType, tuple[list[str], float]] = {}
    facts: list[Fact] = []
    if message.role is Role.user:
        for claim in claims.find(text, vocabulary):
            names, conf = found.get(claim.event_type, ([], 0.0))
            found[claim.event_type] = (names + [claim.object] * (claim.object not in names),
                                       max(conf, claim.confidence))
            if vocabulary.knows(claim.relation):
                facts.append(_fact(message, claim))
        # a flag for each pattern, in ``_gates``' order: the text holds a string it needs (``memory.gates``)
        for rule, admitted in zip(USER_RULES, _gates().admitted(text), strict=True):
            if admitted and rule.pattern.search(text):
                names, conf = found.get(rule.event_type, ([], 0.0))
                found[rule.event_type] = (names, max(conf, rule.confidence))
        if _GREETING.match(text):
            found.setdefault(EventType.greeting, ([], 0.6))
        elif _SMALL_TALK.match(text):
            found.setdefault(EventType.small_talk, ([], 0.4))
        if _QUESTION.search(text):
            found.setdefault(EventType.question, ([], 0.7))
        if not found:
            found[EventType.statement] = ([], 0.5)
    else:
        found[EventType.plan if _PLAN.search(text) else EventType.statement] = ([], 0.6)

    # what every event of the message shares, computed once (segmentation is most of extraction's time)
    shared: _Shared = {"summary": summary(message.content), "text_hash": sha256(message.content),
                       "tokens": tokenize(message.content)}
    if message.role is Role.user and set(found) == {EventType.question} and not _FIRST_PERSON.search(text):
        shared["weight"] = IMPERSONAL_QUESTION_WEIGHT
    events = [_event(message, kind, names, conf, shared) for kind, (names, conf) in found.items()]
    return Extraction(events=events, facts=facts)


@lru_cache(maxsize=1)
def _gates() -> Gates:
    """The gates of the typing rules, in ``USER_RULES``' order."""
    return Gates([rule.pattern for rule in USER_RULES])


class _Shared(TypedDict):
    """The fields every event of one message has in common (``Event`` fields)."""

    summary: str
    text_hash: str
    tokens: list[str]
    weight: NotRequired[float]


def _event(message: Message, kind: EventType, names: list[str], confidence: float, shared: _Shared) -> Event:
    return Event(
        event_id=ids.event_id(message.tenant, message.user_id, message.session_id, message.message_id, kind.value),
        tenant=message.tenant,
        user_id=message.user_id,
        session_id=message.session_id,
        ts=message.client_ts,
        event_type=kind,
        role=message.role,
        keywords=keywords(shared["tokens"], names),
        message_ids=[message.message_id],
        confidence=confidence,
        **shared,
    )


def _fact(message: Message, claim: claims.Claim) -> Fact:
    return Fact(
        tenant=message.tenant,
        user_id=message.user_id,
        relation=claim.relation,
        object=claim.object,
        confidence=claim.confidence,
        evidence_id=ids.event_id(message.tenant, message.user_id, message.session_id, message.message_id,
                                 claim.event_type.value),
        message_ids=[message.message_id],
        ts=message.client_ts,
        device_id=message.device_id,
        session_id=message.session_id,
    )
