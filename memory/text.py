"""Text handling for Chinese and English: cleaning, cutting, tokenising, hashing.

Cleaned text is the one representation stored everywhere: whitespace folded, newlines kept and
HTML-escaped (``<`` ``>`` ``&``) so it is safe to render and nothing the user wrote is dropped.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from collections import Counter
from types import ModuleType

ELLIPSIS = "…"
FULL_TEXT_MARKER = "[全文见历史]"

#: Removed from every text: C0 and C1 controls but tab and newline, zero-width spaces and marks (not U+200D,
#: the joiner inside emoji such as 👨‍👩‍👧), line/paragraph separators, bidi embeddings, overrides and
#: isolates (U+202A–U+202E, U+2066–U+2069: they make text display as something else), the BOM.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
#: Removed too: tag characters (U+E0000–U+E007F, invisible ASCII look-alikes that can carry hidden text) and
#: the non-characters (U+FDD0–U+FDEF and the last two code points of each plane), which are never text.
_NOT_TEXT = re.compile("[\U000e0000-\U000e007f\ufdd0-\ufdef" + "".join(
    f"{chr(plane + 0xfffe)}{chr(plane + 0xffff)}" for plane in range(0, 0x110000, 0x10000)) + "]")
#: Combining marks kept on one character: accents, Vietnamese, Thai and emoji need one to three; "Zalgo" text
#: stacks thousands, which then spill over the lines around it.
MAX_MARKS = 4
#: Text wholly of these (Latin, punctuation and symbols, CJK with its punctuation, full-width forms, emoji)
#: holds no combining mark.
_MARK_FREE = re.compile(r"[\x00-\u02ff\u2000-\u20cf\u2100-\u2bff\u3000-\u3029\u3030-\u3098\u309b-\u9fff"
                        r"\uf900-\ufaff\uff00-\uffef\U0001f000-\U0001faff]*")
_SPACES = re.compile(r"[ \t\u00a0\u3000]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_ENTITY_TAIL = re.compile(r"&[#a-zA-Z0-9]{0,8}$")

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RUNS = re.compile(rf"[{_CJK}]+|[a-z0-9]+(?:['’][a-z]+)?")
_IS_CJK = re.compile(rf"[{_CJK}]")

EN_STOPWORDS = frozenset(
    """a an the and or but if then so to of in on at by for with from as is am are was were be been
    being do does did i me my mine you your we our it its this that these those he she they them his
    her their what which who whom how why when where can could would should will shall may might must
    not no yes just very really too also about into over than there here have has had i'm it's don't
    please""".split()
)
#: Function characters: a Chinese bigram holding one of them makes a poor keyword (still searchable).
ZH_FUNCTION_CHARS = frozenset("我你他她它们的了是在和与跟就都也还吗呢吧啊呀把被说这那有个上下次很太么什怎")


def clean(raw: str) -> str:
    """Normalise a message for storage: NFC, no control characters, tag characters or non-characters, at most
    ``MAX_MARKS`` combining marks on a character, folded spaces, kept newlines."""
    text = unicodedata.normalize("NFC", raw).replace("\r\n", "\n").replace("\r", "\n")
    text = _cap_marks(_NOT_TEXT.sub("", _CONTROL.sub("", text)))
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return html.escape(text, quote=False)


def _cap_marks(text: str) -> str:
    """``text`` with at most ``MAX_MARKS`` combining marks on each character, the first ones kept. A format
    character between them (a joiner) neither counts nor starts a new character."""
    if _MARK_FREE.fullmatch(text):  # most messages: nothing to count
        return text
    kept: list[str] = []
    marks = 0
    for char in text:
        kind = unicodedata.category(char)
        if kind[0] == "M":
            marks += 1
            if marks > MAX_MARKS:
                continue
        elif kind != "Cf":
            marks = 0
        kept.append(char)
    return "".join(kept)


def clean_label(raw: str) -> str:
    """``clean`` for a short label (a belief's object) that may arrive plain (a user, the rules) or already
    cleaned (the LLM stage, a stored claim): the result is the same either way, so cleaning twice is harmless."""
    return clean(html.unescape(raw))


def cut(text: str, limit: int, tail: str = ELLIPSIS) -> str:
    """Cut ``text`` to at most ``limit`` characters including ``tail``, never inside an HTML entity."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - len(tail))]
    head = _ENTITY_TAIL.sub("", head).rstrip()
    return head + tail


def truncate_reply(text: str, limit: int) -> tuple[str, bool]:
    """Long assistant replies are stored cut, with the marker saying the full text is in history."""
    if len(text) <= limit:
        return text, False
    return cut(text, limit) + FULL_TEXT_MARKER, True


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def has_cjk(text: str) -> bool:
    return bool(_IS_CJK.search(text))


def language(text: str) -> str:
    """"zh", "en" or "mixed": which scripts carry the text."""
    plain = html.unescape(text)
    cjk = len(_IS_CJK.findall(plain))
    latin = len(re.findall(r"[A-Za-z]{2,}", plain))
    if cjk and latin:
        return "mixed" if min(cjk / 2, latin) / max(cjk / 2, latin) > 0.25 else ("zh" if cjk / 2 > latin else "en")
    return "zh" if cjk else "en"



def segmenter() -> ModuleType:
    """jieba-rs, imported on first use: its dictionary is ~35 MB of every process that imports it, and most
    of Mneme's processes (beat, Flower, a prefork worker's parent) never segment a word."""
    import rjieba

    return rjieba


def tokenize(text: str, method: str = "jieba") -> list[str]:
    """Search tokens. English: lower-cased words without stopwords. Chinese runs: the words of jieba's
    search-mode segmentation (jieba-rs: jieba's dictionary and output, ~14× faster), or with
    ``method="bigram"`` character bigrams (a lone character as itself). ``bench/recall.py`` measures
    both: jieba recalls better (README), so it is the default."""
    tokens: list[str] = []
    for run in _TOKEN_RUNS.findall(html.unescape(text).lower()):
        if not _IS_CJK.match(run):
            if run not in EN_STOPWORDS:
                tokens.append(run.replace("’", "'"))
        elif method == "jieba":
            words = segmenter().cut_for_search(run, True)
            tokens.extend(w for w in words if not (len(w) == 1 and w in ZH_FUNCTION_CHARS))
        else:
            tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return tokens


def keywords(tokens: list[str], given: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` keywords: the ones a rule named first, then the most frequent of the text's ``tokens``."""
    chosen: list[str] = []
    for word in given:
        if word and word not in chosen:
            chosen.append(word)
    for word, _ in Counter(tokens).most_common():
        if len(chosen) >= n:
            break
        if len(word) > 1 and not ZH_FUNCTION_CHARS.intersection(word) and not any(word in c for c in chosen):
            chosen.append(word)
    return chosen[:n]


def summary(text: str, limit: int = 50) -> str:
    return cut(" ".join(text.split()), limit)
