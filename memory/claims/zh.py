"""Chinese: the rules of what a user says of themselves, and how an object is read — jieba's part-of-speech
tagger finds where a phrase ends (a particle, a conjunction, an adverb, punctuation), never a length."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from memory.anchoring import is_anaphoric
from memory.claims import en
from memory.claims.rule import Read, Rule
from memory.models import EventType

MAX_CHARS = 16  # longer is a clause, not a phrase: no belief rather than a cut one

#: what may stand before the speaker at a clause's start ("其实我…", "不过…")
LEAD = (r"(?:(?:嗯|哦|啊|唉|哈哈|其实|说实话|老实说|另外|而且|还有|然后|不过|但是|可是|所以|对了|"
        r"顺便说一下|总之|反正|本人)\s*[，,]?\s*)*")
_ADV = r"(?:真的|确实|一直|从小|特别|非常|比较|挺|很|最|也|还|都|就|更|超|蛮|好|向来|本来|其实|现在|目前|平时|一向)*"
_NUMBER = r"(\d{1,3}|[一二两三四五六七八九十]{1,3})"
KIN = ("妈妈|母亲|老妈|爸爸|父亲|老爸|爸妈|父母|哥哥|姐姐|弟弟|妹妹|儿子|女儿|孩子|老公|老婆|丈夫|妻子|爱人|爷爷|奶奶|"
       "外公|外婆|姥姥|姥爷|叔叔|阿姨|舅舅|舅妈|婶婶|姑姑|姑父|姑妈|姨妈|姨父|小姨|大姨|伯伯|伯父|伯母|表哥|表姐|表弟|"
       "表妹|堂哥|堂姐|堂弟|堂妹|侄子|侄女|外甥|外甥女|孙子|孙女|外孙|外孙女|公公|婆婆|岳父|岳母|双胞胎|宝宝|闺女")
_OCCUPATION = re.compile(r"(?:师|员|生|家|工|手|医生|护士|老板|经理|会计|律师|记者|警察|司机|厨师|主播|作家|老师|店主|"
                         r"总监|主管|创业者|自由职业者|博主|模特|演员|歌手|画家|士兵|军人|农民|保安|保姆|快递员|外卖员|"
                         r"销售|客服|翻译|编辑|导游|教练|主任|院长|校长|研究员|科学家)$")
_SCHOOL = r"(?:中学|高中|初中|小学|大学|学院|附中|[一二三四五六七八九十\d]+中)"
_SURNAME = (r"(?:王|李|张|刘|陈|杨|黄|赵|吴|周|徐|孙|马|朱|胡|郭|何|林|罗|郑|梁|谢|宋|唐|许|韩|冯|邓|曹|彭|曾|"
            r"肖|田|董|袁|潘|蒋|蔡|余|杜|叶|程|苏|魏|吕|丁|任|沈|姚|卢|姜|崔|钟|谭|陆|汪|范|金|廖|贾|夏|韦|付|方|"
            r"邹|孟|熊|秦|邱|尹|薛|闫|段|雷|侯|龙|陶|黎|贺|顾|毛|郝|龚|邵|万|钱|严|覃|武|戴|莫|孔|汤|欧阳|司马|诸葛)")
_GRADE = r"(?:高[一二三]|初[一二三]|[一二三四五六]年级|大[一二三四]|研[一二三])"
_EMOTION = ("累|烦|焦虑|紧张|开心|高兴|难过|沮丧|压力好大|压力很大|压力大|崩溃|伤心|郁闷|无聊|兴奋|孤独|害怕|生气|失落|"
            "委屈|迷茫|激动|难受|疲惫|心累|低落|慌|担心|害羞|幸福|满足|放松|尴尬|烦躁|emo|不开心|不高兴|不舒服|"
    "压力山大|心情不好|心情很差|心情特别差|心情好差")
_GOAL_VERBS = ("考上|考进|考入|考过|考到|学会|学好|提高|通过|掌握|拿到|成为|当上|当一名|做一名|减肥|减掉|瘦到|瘦下来|"
               "存够|攒够|"
               "练好|练成|读完|写完|跑完|完成|开一家|开个|买房|出国|留学|转行|创业|戒烟|戒掉|拿下|进入")
_STOP_TAGS = ("u", "y", "c", "d", "x", "w", "e", "o", "zg")  # particles, conjunctions, adverbs, punctuation…
_DEMONSTRATIVES = frozenset({"那个", "这个", "那道", "这道", "那条", "这条", "这种", "这类"})
_KINDS = frozenset({"那种", "那类"})  # "那种网红店": 网红店 as a kind ("这种讲法" points at the other side's)
_FUNCTION_TAGS = ("p", "c", "u", "d", "q", "m", "f")  # a preposition, conjunction, measure word… alone: no object
_AND = frozenset({"和", "与", "跟", "及", "以及", "还有", "或者", "或"})
DEIXIS = re.compile(r"^(?:这|那|它|他|她|你|您|哪|什么|谁|啥|怎|自己|大家|人家|别人|某|此|其|本)")
_ASKED = re.compile(r"什么|哪|谁|怎么|为什么|多少|几岁|几个")
_TRAILING = re.compile(r"(?:了|的|啊|呀|呢|吧|哦|嘛|啦|喔|咯|一点|一些|而已|罢了)+$")
_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def zh_number(text: str) -> int | None:
    """Chinese or Arabic numerals up to 199: 十七 → 17, 二十 → 20, 17 → 17."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    return (_DIGITS.get(tens, 0) if tens else 1) * 10 + (_DIGITS.get(ones, 0) if ones else 0)


@lru_cache(maxsize=1)
def _tagger() -> Any:
    """jieba's part-of-speech tagger, loaded on first use (its dictionary is read once a process)."""
    import jieba  # type: ignore[import-untyped]
    import jieba.posseg  # type: ignore[import-untyped]

    jieba.setLogLevel(60)
    return jieba.posseg


@lru_cache(maxsize=256)
def _tagged(text: str) -> tuple[tuple[str, str], ...]:
    """(word, tag) of ``text`` by the dictionary alone (no HMM guesses at unknown words: faster, and a word the
    dictionary lacks stays as the characters it is)."""
    return tuple((pair.word, pair.flag) for pair in _tagger().cut(text, HMM=False))


def ok(phrase: str) -> bool:
    """A phrase a belief can hold: not empty, not a clause, not a pronoun, question word or 你; deixis only when it
    names a kind ("那个定律": anchored to the session's last 定律 downstream, ``memory.anchoring``, or not made)."""
    return 0 < len(phrase) <= MAX_CHARS and (not DEIXIS.match(phrase) or is_anaphoric(phrase)) \
        and not _ASKED.search(phrase) and not re.search(r"你|您", phrase)


def speaks(clause: str) -> bool:
    """Whether a clause starting with 我 has the speaker for its subject (a subjectless clause after it is theirs):
    "我喜欢安静的咖啡馆" yes; "我刚路过的那个商场" no — its first verb modifies a noun (the 商场 is the subject)."""
    pairs = _tagged(clause)
    verb = next((n for n, (_, tag) in enumerate(pairs) if tag.startswith("v")), None)
    if verb is None:
        return "的" not in clause[:-1]
    return verb + 1 >= len(pairs) or pairs[verb + 1][0] != "的"


def name(text: str) -> list[str]:
    """A name, not a dictionary word that is something else (我是王者, 我是张老师)."""
    pairs = _tagged(text.strip())
    return [] if len(pairs) == 1 and not pairs[0][1].startswith("nr") or any(
        tag.startswith("n") and not tag.startswith("nr") and len(w) > 1 for w, tag in pairs) else [text.strip()]


def _phrases(text: str, several: bool) -> list[str]:
    """The phrase(s) at the start of ``text``: tagged words until a stop tag; ``several``: 和/与 starts another.
    A modifier's 的 joins the noun after it (安静的咖啡馆); a phrase that stops at 的 or 、 before more of itself
    ("开一家属于自己的、只卖…的小店") is longer than a rule can read: nothing."""
    phrases: list[str] = []
    words: list[str] = []
    pairs = _tagged(text)
    for n, (word, tag) in enumerate(pairs):
        after_word, after_tag = pairs[n + 1] if n + 1 < len(pairs) else ("", "")
        if (word in _AND or word == "、") and words:
            if not several:
                if word == "、":
                    return []  # a list the rule cannot read whole
                break
            phrases.append("".join(words))
            words = []
            continue
        if word == "的" and words:
            if after_tag.startswith(("n", "v", "a", "eng", "m")):
                words.append(word)
                continue
            if after_word == "、" and several:
                continue  # "红色的、蓝色的": the next of the list
            if after_word == "、" or (after_word and after_tag not in ("x", "w", "y", "ul", "uj")):
                return []
            break
        if words and (word in _KINDS or tag == "r") and after_word:
            break  # "华为Mate60这款手机": what follows names its kind again
        if not words and word in _KINDS and after_word:
            continue  # "那种网红店": a kind, not a thing to point at
        if tag.startswith(_STOP_TAGS) and tag != "eng":  # "eng" (Latin letters) is no interjection "e"
            if not words and tag.startswith("d"):
                continue  # a leading adverb (也, 还) is not the object
            break
        if not words and (DEIXIS.match(word) or _ASKED.search(word)):
            if word not in _DEMONSTRATIVES or not after_word:
                return []  # a pronoun or question word: no object
            words.append(word)  # "那个定律": the kind it names decides (``ok``)
            continue
        words.append(word)
    phrases.append("".join(words))
    if len(words) == 1 and dict(pairs).get(words[0], "").startswith(_FUNCTION_TAGS):
        return []  # "我比较喜欢通过刷题来学" read to 通过: a preposition is no object
    return [p for p in (_TRAILING.sub("", p).strip() for p in phrases) if ok(p)]


# --- readers of a rule's group ---------------------------------------------------------------------------------

def phrase(text: str) -> list[str]:
    return _phrases(text, several=False)[:1]


def phrases(text: str) -> list[str]:
    return _phrases(text, several=True)


def word(text: str) -> list[str]:
    return [text.strip()] if text.strip() else []


def age(text: str) -> list[str]:
    n = zh_number(text.strip())
    return [str(n)] if n is not None and 1 <= n <= 120 else []


def rest(text: str) -> list[str]:
    """The clause's end as it is: a name, a model, a place ("OPPOReno7", "亚瑟士Gel-Kayano26")."""
    found = _TRAILING.sub("", re.sub(r"^(?:一个|一款|一台|一家|个|那个|这个)", "", text)).strip()
    latin = bool(found) and not re.search(r"[\u4e00-\u9fff]", found) and len(found.split()) <= 4
    return [found] if ok(found) or latin else []


def place(text: str) -> list[str]:
    if re.fullmatch(r"\s*[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}\s*", text):  # 住在 Shenzhen
        return [text.strip()]
    found = phrase(text)
    return found if found and re.search(r"[\u4e00-\u9fff]{2}", found[0]) else []


def place_name(text: str) -> list[str]:
    """Only a place name, tagged so (我是北京人, 我在上海工作)."""
    words = _tagged(text.strip())
    return [text.strip()] if words and all(tag == "ns" for _, tag in words) else []


def workplace(text: str) -> list[str]:
    """Where they work when it is not a place name (a place is where they live: ``place_name``)."""
    return [] if place_name(text) else phrase(text)


def occupation(text: str) -> list[str]:
    if not re.search(r"[\u4e00-\u9fff]", text):  # 我是一名 software engineer
        return en.occupation(text)
    found = phrase(text)
    return found if found and _OCCUPATION.search(found[0]) and not re.match(_GRADE, found[0]) else []


def goal(text: str) -> list[str]:
    first, *others = re.split(r"[，,。！!？?；;、]", text)
    if others and text[len(first):len(first) + 1] == "、":
        return []  # a list the rule cannot read whole
    found = _TRAILING.sub("", first)
    return [found] if ok(found) else []


#: a family member said with the speaker's possessive (我妈, 我的女儿): true in any sentence, reported speech too
KIN_RULE = Rule("family", "family", EventType.identity,
                re.compile(rf"(?:^|[^他她它你])我(?:的|家)?({KIN}|妈|爸)(?!们|呀|啊)"), word)


def _rules() -> list[Rule]:
    start = r"^我(?!们)(?:自己)?"
    mine = rf"(?:(?!{KIN}|他|她|家|老大|老二|老三|同事|朋友|同学)[^，。])"  # between 我 and a verb, of no one else

    def rule(family: str, relation: str, kind: EventType, pattern: str, read: Read) -> Rule:
        return Rule(family, relation, kind, re.compile(pattern), read)

    identity, likes, dislike = EventType.identity, EventType.preference, EventType.dislike
    return [
        rule("age", "age", EventType.age_declaration,
             rf"{start}(?:今年|现在|已经|都|才|刚|刚满|已满|满)*{_NUMBER}(?:周)?岁(?:了|啦|半)?$", age),
        rule("age", "age", EventType.age_declaration, rf"{start}(?:今年|已经|都)+{_NUMBER}(?:了|啦)$", age),
        rule("name", "name", identity, rf"{start}(?:叫|叫做|的名字(?:是|叫)|名字叫)\s*"
             rf"([\u4e00-\u9fff·]{{2,4}}?|[A-Z][a-z]+(?: [A-Z][a-z]+)?)(?:就好|就行|吧)?$", word),
        rule("name", "name", identity,
             r"^(?:你|您)?(?:可以|就)?(?:叫|喊)我\s*([\u4e00-\u9fff·]{2,4}?|[A-Z][a-z]+)"
             r"(?:就好|就行|就可以|吧)?$", word),
        rule("name", "name", identity, rf"{start}是({_SURNAME}[\u4e00-\u9fff]{{1,2}})$", name),
        rule("location", "location", identity, rf"{start}{_ADV}(?:住在|住|家在|生活在|定居在|定居)(.+)$", place),
        rule("location", "location", identity,
             rf"{start}{mine}{{0,10}}?(?:一直|现在|目前)(?:住在|生活在|定居在)(.+)$", place),
        rule("location", "location", identity,
             rf"{start}(?:家)?住的(?:那个|这个)?(?:小区|地方|城市|村子|村|社区|公寓|楼盘)?(?:叫|是|就是)(.+)$", rest),
        rule("location", "location", identity,
             rf"{start}{_ADV}在(.+?)(?:工作|上班|打工|任职|生活|做|当)(?:了|过)?", place_name),
        rule("hometown", "location", identity, rf"{start}(?:是|来自)(.+?)(?:人)?$", place_name),
        rule("occupation", "occupation", identity, rf"{start}{_ADV}(?:是|当|做)(?:一名|一个|一位|个|名|位)?(.+)$",
             occupation),
        rule("occupation", "occupation", identity, rf"{start}(?:的工作|的职业)(?:是|：|:)\s*(.+)$", phrase),
        rule("occupation", "occupation", identity, rf"{start}{_ADV}在(.+?)(?:工作|上班|打工|任职)$", workplace),
        rule("occupation", "occupation", identity, rf"{start}{_ADV}在\S{{2,10}}?(?:做|当)(.+)$", occupation),
        rule("occupation", "occupation", identity, rf"{start}(?:是)?做(.{{2,10}}?)的$", phrase),
        rule("grade", "grade", identity, rf"{start}(?:{mine}{{0,12}}?(?:读|上|念|是|今年|现在))?({_GRADE})"
             rf"(?![\u4e00-\u9fff]{{0,2}}(?:的时候|那年|时))", word),
        rule("school", "school", identity, rf"{start}{_ADV}(?:在|是)(.{{2,12}}?{_SCHOOL})(?:的|读|上|念)", word),
        KIN_RULE,
        rule("family", "family", identity, rf"{start}(?:家)?有(?:一个|两个|三个|一对|个|一位)?({KIN})", word),
        rule("favourite", "likes", likes, rf"{start}(?:最喜欢|最爱)的(?:\S{{1,6}}?)(?:是|就是)(.+)$", rest),
        rule("favourite", "likes", likes, rf"{start}的(?:爱好|兴趣爱好|兴趣)(?:是|就是)(.+)$", phrases),
        rule("dislikes", "dislikes", dislike,
             rf"{start}{_ADV}(?:不喜欢|不爱|讨厌|受不了|反感|烦透了|最烦|不太喜欢|很不喜欢|特别讨厌)(.+)$", phrases),
        rule("dislikes", "dislikes", dislike, rf"{start}{_ADV}(?:从来)?不吃(.+)$", phrases),
        rule("dislikes", "dislikes", dislike,
             rf"{start}对(.{{1,12}}?)(?:一点)?(?:兴趣都没有|没有?(?:什么)?兴趣|不感兴趣|不太感兴趣)", phrase),
        rule("likes", "likes", likes,
             rf"{start}{_ADV}(?:喜欢|爱死了?|爱|热爱|偏爱|酷爱|爱上了|迷上了|痴迷于?)(?!(?:死了?)?(?:你|您)|上你)(.+)$",
             phrases),
        rule("likes", "likes", likes, rf"{start}对(.{{1,12}}?)(?:很|特别|非常|挺|比较|超)?(?:感兴趣|有兴趣)", phrase),
        rule("subject", "subject_preference", likes,
             r"^(.{1,8}?)(?:一直|也)?是我最(?:喜欢|爱|擅长)的(?:科目|学科|课)", phrase),
        rule("obstacle", "learning_obstacle", EventType.concept_confusion,
             r"^(.{1,8}?)(?:一直|总是|也)?是我最(?:头疼|薄弱|差|弱|讨厌|怕)的(?:科目|学科|课|一科)", phrase),
        rule("obstacle", "learning_obstacle", EventType.concept_confusion,
             r"^(.{2,12}?)我(?:老是|总是|一直|经常|还是)"
             r"(?:用错|搞错|搞不懂|学不会|记不住|弄不明白|做错)", phrase),
        rule("mastery", "mastery", EventType.statement,
             rf"{start}(?:已经)?(?:掌握了|学会了|熟练掌握了?|精通)(.+)$", phrase),
        rule("mastery", "mastery", EventType.statement,
             r"^(.{2,12}?)我(?:已经|早就|都)?(?:掌握了|学会了|很熟了|挺熟了|熟练了|会了)", phrase),
        rule("mastery", "mastery", EventType.statement, rf"{start}{_ADV}(?:擅长|精通|拿手)(.+)$", phrase),
        rule("style", "learning_style", likes, rf"{start}是([\u4e00-\u9fff]{{1,4}}型(?:的)?学习者)", word),
        rule("goal", "goal", EventType.goal,
             rf"{start}(?:(?:今年|明年|现在|目前|这学期|这个学期|暑假|寒假|最大|唯一|主要)?的)?\s*(?:目标|梦想|愿望|goal)"
             rf"(?:就|其实)?(?:是|：|:)\s*(.+)$", goal),
        rule("goal", "goal", EventType.goal,
             rf"{start}{_ADV}(?:想|要|希望|打算|计划|准备|立志|决定)(?:要|能)?((?:{_GOAL_VERBS}).*)$", goal),
        rule("emotion", "emotion_state", EventType.emotion,
             rf"{start}(?:现在|今天|最近|这几天|此刻|真的)?(?:好|很|有点|有些|非常|真|太|特别|超|挺|蛮)?({_EMOTION})"
             rf"(?:了|啊|呀|死了|极了|坏了)?$", word),
        rule("product", "product_owned", EventType.statement,
             rf"{start}(?:家)?(?:手头|平时|现在|一直)?(?:用的|买的|穿的|开的|戴的|养的)(?:\S{{1,6}}?)"
             rf"(?:是|就是)(.+)$", rest),
        rule("product", "product_owned", EventType.statement,
             rf"{start}{_ADV}(?:最近|前几天|上个月|去年)?(?:刚|刚刚)?(?:换了|买了|入了|入手了|新买了)"
             rf"(?:一台|一个|一部|一款|一辆|一双|一只|个|台|部|辆|双|只)(.+)$", rest),
    ]


RULES = tuple(_rules())
