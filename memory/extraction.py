"""Rule extraction, Chinese and English: one message → typed events (at least one) + relation facts.

Every message becomes at least one event so nothing said is unsearchable: a user message that no
rule types is a ``statement``; an assistant reply is a ``plan`` when it gives steps, else a ``statement``.

Two kinds of rules, both keeping to the deployment's vocabulary (``memory.vocabulary``): the built-in ones
here (``USER_RULES``, ``MASTERY``: age, name, grade, school, likes, dislikes, response preference, learning
obstacles and mastery, goals, emotions), whose facts are kept only for the relations the vocabulary names (the
event the message is stays), and the patterns the vocabulary file gives for its own relations
(``Vocabulary.rules``: the first group is the object).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import NotRequired, TypedDict

from memory import ids
from memory.gates import Gates
from memory.models import Event, EventType, Extraction, Fact, Message, Relation, Role
from memory.text import keywords, sha256, summary, tokenize
from memory.vocabulary import Vocabulary, load_vocabulary

_STOP = r"[，。！？；、,.!?;\n]"
_SPAN = r"[^，。！？；、,.!?;\n]"
_TRAILING = re.compile(r"(?:了|的|啊|呀|呢|吧|哦|嘛|一点|一些|\s)+$")
_LEADING_EN = re.compile(r"^(?:the|a|an|to|about|with|when you)\s+", re.I)

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def zh_number(text: str) -> int | None:
    """Chinese or Arabic numerals up to 199: 十七 → 17, 二十 → 20, 17 → 17."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _ZH_DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    value = (_ZH_DIGITS.get(tens, 0) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    return value


def _object(text: str) -> str:
    text = _LEADING_EN.sub("", _TRAILING.sub("", text.strip())).strip()
    return text[:30]


def _age(m: re.Match[str]) -> list[str]:
    n = zh_number(m.group(1))
    return [str(n)] if n is not None and 1 <= n <= 130 else []


def _groups(m: re.Match[str]) -> list[str]:
    return [o for o in (_object(g) for g in m.groups() if g) if o]


def _short_zh(m: re.Match[str]) -> list[str]:
    return ["简短"]


def _short_en(m: re.Match[str]) -> list[str]:
    return ["short answers"]


@dataclass(frozen=True)
class Rule:
    event_type: EventType
    pattern: re.Pattern[str]
    relation: Relation | None = None
    confidence: float = 0.8
    objects: Callable[[re.Match[str]], list[str]] = _groups


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_SCHOOL = r"(?:中学|高中|初中|小学|大学|学院|附中|[一二三四五六七八九十\d]+中)"
_ANSWER_WORDS = _rx(r"answer|response|repl(?:y|ies)|explanation|回答|解释|回复|讲解")
_EN_ANSWERS = r"(?:answers?|responses?|repl(?:y|ies)|explanations?)"
#: the user's own goal, stated as one ("我的目标是…", "我今年的目标：…", "我的goal是…", "my goal is to…"); not a
#: question about it ("我的目标是什么？"), not someone else's ("他的目标", "这个目标太远了"), not a goalkeeper
_ZH_GOAL = (rf"我(?:(?:今年|明年|现在|目前|这学期|这个学期|暑假|寒假)的|的(?:最大的?|唯一的?|主要的?|小)?)\s*"
            rf"(?:目标|goal)(?:就|其实)?(?:是|：|:)\s*(?!什么|啥|哪|多少|不是|否)({_SPAN}{{1,30}})")
_EN_GOAL = (r"\bmy (?:(?:main|big|biggest|only|real|ultimate|new|current|personal)\s+)?goals?"
            r"(?:\s+(?:for\s+)?(?:this|the|next)\s+(?:year|month|week|semester|term|summer))?\s*(?:is|are|:)\s+"
            r"(?!what\b|unclear\b|not clear\b)([^,.!?;\n]{1,40})")

USER_RULES: tuple[Rule, ...] = (
    # age
    Rule(EventType.age_declaration, _rx(r"我(?:今年|现在|已经)?(\d{1,3}|[一二两三四五六七八九十]{1,3})(?:周)?岁"),
         Relation.age, 0.9, _age),
    Rule(EventType.age_declaration,
         _rx(r"\bi(?:'m| am|m)\s+(\d{1,3})(?=\s*(?:years?\s*old|y/?o\b|$|[,.!;]|\s+and\b))"),
         Relation.age, 0.9, _age),
    Rule(EventType.age_declaration, _rx(r"\b(?:my age is|i turned|i just turned)\s+(\d{1,3})\b"),
         Relation.age, 0.9, _age),
    # name
    Rule(EventType.identity,
         _rx(rf"我(?:叫|的名字是|名字叫|的名字叫)\s*(?!什么|啥|谁|哪|多少)([\u4e00-\u9fffA-Za-z·]{{1,12}}?)(?={_STOP}|$|\s)"),
         Relation.name, 0.9),
    Rule(EventType.identity, _rx(r"\b(?:my name is|call me|my name's)\s+([a-z][\w'-]{0,30})"), Relation.name, 0.9),
    # grade / school stage
    Rule(EventType.identity,
         _rx(r"(?:我|上|读|念|在)[^，。,.]{0,4}?(高[一二三]|初[一二三]|[一二三四五六七八九]年级|大[一二三四]|研[一二三])"),
         Relation.grade, 0.85),
    Rule(EventType.identity, _rx(r"\bi(?:'m| am) in (?:the )?(\d{1,2}(?:st|nd|rd|th)? grade|year \d{1,2})\b"),
         Relation.grade, 0.85),
    Rule(EventType.identity, _rx(r"\bi(?:'m| am) an? (freshman|sophomore|junior|senior)\b"), Relation.grade, 0.8),
    # dislikes (before likes: "我不喜欢" must not read as "喜欢")
    Rule(EventType.dislike,
         _rx(rf"我(?:很|最|特别|非常|真的|一直)?(?:不喜欢|讨厌|受不了|烦透了|不爱)({_SPAN}{{1,30}})"),
         Relation.dislikes, 0.7),
    Rule(EventType.dislike,
         _rx(r"\bi (?:really |just )?(?:(?:don't|do not|dont) (?:like|enjoy)|hate|can't stand|cannot stand|"
             r"dislike|can't bear)\s+([^,.!?;\n]{1,40})"),
         Relation.dislikes, 0.7),
    # likes and preferences
    Rule(EventType.preference,
         _rx(rf"我(?:很|最|特别|非常|挺|比较|更)?(?:喜欢|爱|热爱|偏好)(?!你)({_SPAN}{{1,30}})"),
         Relation.likes, 0.7),
    Rule(EventType.preference,
         _rx(r"\bi (?:really |do |also |just )?(?:like|love|enjoy|adore|prefer|'d prefer|would prefer)\s+"
             r"([^,.!?;\n]{1,40})"),
         Relation.likes, 0.7),
    Rule(EventType.preference,
         _rx(r"(?:回答|解释|回复|讲解)(?:能|可以|请)?(?:更|再|尽量)?(简短|简洁|短|详细|具体|慢)(?:一点|一些|些)?"),
         Relation.response_preference, 0.8),
    # answer briefly: 请简短回答 / 简单点回答 / 说短点 / 别给我讲太长的 / 长话短说 / keep your answers short /
    # please answer briefly; not "简短回答：不行" or "the short answer is no" (a short answer, not a wish)
    Rule(EventType.preference,
         _rx(r"(?:(?:简短|简洁|精简|简要)(?:一点|一些|点|些)?地?(?:回答|回复|作答|解释)|"
             r"简单(?:一点|一些|点|些)?地?(?:回答|回复|作答))(?!\s*(?:[:：]|是|就是))|"
             r"(?:说|讲|回答|回复)得?(?:简短|简洁|短)(?:一点|一些|点|些)|"
             r"^\s*(?:请|麻烦)?你?(?:简短|简洁|精简)(?:一点|一些|点|些)\s*[!！。.~]*$"),
         Relation.response_preference, 0.8, _short_zh),
    Rule(EventType.preference,
         _rx(r"(?:别|不要|不用|无需|不需要)(?:(?:给我|跟我|和我|对我)(?:讲|说|回答|回复|解释|答)?|讲|说|回答|回复|解释)得?"
             r"(?:太|那么|这么|很)?(?:长|多|啰嗦|啰唆|罗嗦|冗长)(?!时间|期|大|久|远|途|城|江|高|辈|度|少)|"
             r"(?:回答|回复|解释|讲解)(?:别|不要)(?:太|那么|这么)?(?:长|啰嗦|冗长)|"
             r"(?:别|不要)(?:再)?(?:啰嗦|啰唆|罗嗦|长篇大论)|长话短说"),
         Relation.response_preference, 0.8, _short_zh),
    Rule(EventType.preference,
         _rx(rf"\bkeep (?:your |the |my |these |those )?{_EN_ANSWERS} (?:short|brief|concise)\b|"
             rf"(?:^|[,.!;]\s*|\b(?:please|pls|just|and|so)\s+)(?:keep (?:it|them)|be) (?:short|brief|concise)\b|"
             rf"\b(?:answer|reply|respond|explain)(?: (?:me|it|this|that))? (?:briefly|concisely|in short)\b|"
             rf"\b(?:give me|i (?:want|need)|i'd like|i would like|only) (?:(?:very|really) )?(?:short|brief|"
             rf"concise)(?:er)? {_EN_ANSWERS}|\b(?:short|brief) {_EN_ANSWERS} only\b|"
             rf"\b(?:don't|do not|dont|no) (?:give me )?(?:long|lengthy|wordy) {_EN_ANSWERS}|"
             rf"\byour {_EN_ANSWERS} (?:are|is) (?:way |much |far )?too long"),
         Relation.response_preference, 0.8, _short_en),
    # confusion about a concept
    Rule(EventType.concept_confusion,
         _rx(rf"(?:把|将)({_SPAN}{{1,15}}?)(?:和|与|跟)({_SPAN}{{1,15}}?)(?:搞混|弄混|混淆|搞错|弄错|分不清|弄反|记混)"),
         Relation.learning_obstacle, 0.7),
    Rule(EventType.concept_confusion,
         _rx(rf"(?:分不清|搞不清|区分不了)(?:楚)?({_SPAN}{{1,15}}?)(?:和|与|跟)({_SPAN}{{1,15}})"),
         Relation.learning_obstacle, 0.7),
    Rule(EventType.concept_confusion,
         _rx(rf"(?:不懂|不明白|不理解|搞不懂|弄不懂|看不懂|没懂|没搞懂|学不会)({_SPAN}{{1,20}})"),
         Relation.learning_obstacle, 0.7),
    Rule(EventType.concept_confusion,
         _rx(r"\bi (?:always |often |keep |still )?(?:confuse|mix up|mixing up|get confused between)\s+"
             r"(.+?)\s+(?:and|with)\s+([^,.!?;\n]{1,30})"),
         Relation.learning_obstacle, 0.7),
    Rule(EventType.concept_confusion,
         _rx(r"\bi (?:still )?(?:don't|do not|dont) (?:understand|get)\s+([^,.!?;\n]{1,40})"),
         Relation.learning_obstacle, 0.7),
    Rule(EventType.concept_confusion, _rx(r"\bi'?m (?:confused|lost) (?:about|by|with)\s+([^,.!?;\n]{1,40})"),
         Relation.learning_obstacle, 0.7),
    # explicit requests to the agent
    Rule(EventType.request, _rx(r"^(?:请你?|麻烦你?|能不能|可不可以|你能不能|以后|下次)(.{1,40})")),
    Rule(EventType.request, _rx(r"(?:^|[，。,.]\s*)(?:别|不要)(再?.{1,30})")),
    Rule(EventType.request, _rx(r"^(?:please|can you|could you|would you|from now on)\b\s*(.{1,60})")),
    # goals, emotions, failures, feedback
    Rule(EventType.goal, _rx(rf"我(?:想|要|希望|打算|计划)要?((?:考上|学会|提高|通过|掌握|拿到){_SPAN}{{1,20}})"),
         Relation.goal, 0.7),
    Rule(EventType.goal, _rx(r"\bi (?:want|hope|plan|would like|'d like) to\s+([^,.!?;\n]{1,40})"), Relation.goal, 0.7),
    Rule(EventType.goal, _rx(_ZH_GOAL), Relation.goal, 0.8),
    Rule(EventType.goal, _rx(_EN_GOAL), Relation.goal, 0.8),
    Rule(EventType.emotion, _rx(r"我(?:好|很|有点|非常|真|太)?(累|烦|焦虑|紧张|开心|高兴|难过|沮丧|压力大|崩溃)"),
         Relation.emotion_state, 0.6),
    Rule(EventType.emotion,
         _rx(r"\bi(?:'m| am| feel)\s+(?:so |very |really |a bit |kind of )?"
             r"(tired|stressed|anxious|nervous|happy|sad|upset|frustrated|overwhelmed)\b"),
         Relation.emotion_state, 0.6),
    # school
    Rule(EventType.identity, _rx(rf"我(?:在|是)({_SPAN}{{2,12}}?{_SCHOOL})(?:的|读|上)"), Relation.school, 0.85),
    Rule(EventType.identity, _rx(r"\bi (?:go to|study at|attend)\s+([A-Z][\w' -]{2,40}(?:School|College|University))"),
         Relation.school, 0.85),
    Rule(EventType.operation_failure, _rx(r"(打不开|没反应|报错|崩溃了|闪退|失败了|出错了|用不了)")),
    Rule(EventType.operation_failure,
         _rx(r"\b(doesn't work|does not work|crashed|crashes|not working|won't load|keeps failing)\b")),
    Rule(EventType.feedback,
         _rx(r"((?:这个|你的)?(?:解释|回答|例子|方法)(?:很|真|太|不太|不)?(?:好|棒|清楚|有用|没用|有帮助)|谢谢|懂了|明白了)")),
    Rule(EventType.feedback,
         _rx(r"\b(thanks|thank you|that helps|that helped|that didn't help|makes sense|got it)\b")),
)

#: A correct statement of a concept's core fact shows mastery of it (and is counter-evidence to a
#: learning obstacle on it): "我不懂三角函数" … later "sin²x+cos²x=1".
MASTERY: tuple[tuple[re.Pattern[str], str], ...] = (
    (_rx(r"sin\s*(?:\^\s*2|²)\s*\(?x\)?\s*\+\s*cos\s*(?:\^\s*2|²)\s*\(?x\)?\s*=\s*1"), "三角函数"),
    (_rx(r"tan\s*\(?x\)?\s*=\s*sin\s*\(?x\)?\s*/\s*cos\s*\(?x\)?"), "三角函数"),
    (_rx(r"加速度(?:是|就是|等于)速度(?:的)?变化(?:率|量除以时间)"), "加速度"),
    (_rx(r"a\s*=\s*(?:Δ|delta\s*)v\s*/\s*(?:Δ|delta\s*)t"), "加速度"),
    (_rx(r"\bF\s*=\s*m\s*\*?\s*a\b|合外力等于质量乘以加速度"), "牛顿第二定律"),
    (_rx(r"\bp\s*=\s*m\s*\*?\s*v\b|动量(?:等于|是)质量乘以速度"), "动量"),
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
        # a flag for each pattern, in ``_gates``' order: the text holds a string it needs (``memory.gates``)
        tried = iter(_gates(vocabulary).admitted(text))
        for rule in USER_RULES:
            if not next(tried):
                continue
            for match in rule.pattern.finditer(text):
                objects = rule.objects(match)
                if rule.relation is not None and not objects:
                    continue
                relation = rule.relation
                if relation is Relation.likes and _ANSWER_WORDS.search(match.group(0)):
                    relation = Relation.response_preference
                names, conf = found.get(rule.event_type, ([], 0.0))
                found[rule.event_type] = (names + [o for o in objects if o not in names], max(conf, rule.confidence))
                if relation is not None:
                    facts += [_fact(message, rule.event_type, relation, o, rule.confidence) for o in objects]
        for pattern, concept in MASTERY:
            if next(tried) and pattern.search(text):
                found.setdefault(EventType.statement, ([], 0.6))
                facts.append(_fact(message, EventType.statement, Relation.mastery, concept, 0.6))
        for extra in vocabulary.rules:
            if not next(tried):
                continue
            objects = [o for m in extra.pattern.finditer(text) if (o := _object(m.group(1) or ""))]
            if objects:
                names, conf = found.get(extra.event_type, ([], 0.0))
                found[extra.event_type] = (names + [o for o in objects if o not in names], max(conf, extra.confidence))
                facts += [_fact(message, extra.event_type, extra.relation, o, extra.confidence) for o in objects]
        facts = [f for f in facts if vocabulary.knows(f.relation)]
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
    return Extraction(events=events, facts=_dedupe(facts))


@lru_cache(maxsize=8)
def _gates(vocabulary: Vocabulary) -> Gates:
    """The gates of every pattern a user's message is tried on, in the order ``extract`` tries them: the
    built-in rules', mastery's, the vocabulary's."""
    return Gates([rule.pattern for rule in USER_RULES] + [pattern for pattern, _ in MASTERY]
                 + [rule.pattern for rule in vocabulary.rules])


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


def _fact(message: Message, kind: EventType, relation: str, obj: str, confidence: float) -> Fact:
    return Fact(
        tenant=message.tenant,
        user_id=message.user_id,
        relation=relation,
        object=obj,
        confidence=confidence,
        evidence_id=ids.event_id(message.tenant, message.user_id, message.session_id, message.message_id, kind.value),
        message_ids=[message.message_id],
        ts=message.client_ts,
        device_id=message.device_id,
        session_id=message.session_id,
    )


def _dedupe(facts: list[Fact]) -> list[Fact]:
    seen: dict[tuple[str, str], Fact] = {}
    for fact in facts:
        seen.setdefault((fact.relation, fact.object.lower()), fact)
    return list(seen.values())
