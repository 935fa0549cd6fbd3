"""Entity anchoring: "那个定律", "之前说的那个公式", "that red button" name the most recent entity of that
kind in the session's working memory; when there is none, a descriptive name ("red button", "定律") is
kept, so the graph id (``ids.concept_id``) is still deterministic and readable."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from pydantic import BaseModel

from memory.text import segmenter

_ZH_ANAPHOR = re.compile(r"^(?:之前|上次|刚才|前面)?(?:说的|讲的|提到的)?"
                         r"(?:那个|这个|那道|这道|那条|这条|那种|这种)(.+)$")
_EN_ANAPHOR = re.compile(r"^(?:that|this|the same|the one)\s+(.+?)(?:\s+(?:you|i) (?:said|mentioned|showed))?$",
                         re.I)
ZH_KINDS = ("定律", "定理", "定则", "公式", "按钮", "题", "例子", "方法", "概念", "单词", "视频", "游戏", "课", "软件",
            "功能", "页面", "方案", "作业")
_EN_STOP = frozenset("a an the that this my your one".split())


class Anchored(BaseModel):
    name: str
    anchored_to: str | None = None  # message id of the mention, when one was found


def _zh_phrases(text: str, kind: str) -> list[str]:
    """Words naming a ``kind`` in ``text``, in order: 楞次定律, 右手+定则 → 右手定则."""
    words = segmenter().cut(text, True)
    out = []
    for i, word in enumerate(words):
        if word.endswith(kind) and len(word) > len(kind):
            out.append(word)
        elif word == kind and i > 0 and re.fullmatch(r"[\u4e00-\u9fff]{2,6}", words[i - 1]) \
                and not _ZH_ANAPHOR.match(words[i - 1] + word):
            out.append(words[i - 1] + word)
    return out


def is_anaphoric(obj: str) -> bool:
    return bool(_ZH_ANAPHOR.match(obj) or _EN_ANAPHOR.match(obj))


def anchor(obj: str, recent: Sequence[tuple[str, str]]) -> Anchored:
    """Resolve an anaphoric object against ``recent`` (message id, text) pairs, newest first."""
    zh = _ZH_ANAPHOR.match(obj)
    if zh:
        rest = zh.group(1).strip()
        kind = next((k for k in ZH_KINDS if rest.endswith(k)), None)
        if kind:
            modifier = rest[: -len(kind)]
            for message_id, text in recent:
                found = [w for w in _zh_phrases(html.unescape(text), kind) if modifier in w]
                if found:
                    return Anchored(name=found[-1], anchored_to=message_id)
        return Anchored(name=rest)
    en = _EN_ANAPHOR.match(obj)
    if en:
        words = [w for w in re.findall(r"[a-z0-9']+", en.group(1).lower()) if w not in _EN_STOP]
        if words:
            kind, modifiers = words[-1], words[:-1]
            pattern = re.compile(rf"\b((?:[a-z0-9'-]+\s+){{0,3}}{re.escape(kind)}s?)\b", re.I)
            for message_id, text in recent:
                for found in pattern.findall(html.unescape(text)):
                    phrase = [w for w in found.lower().split() if w not in _EN_STOP]
                    if all(m in phrase for m in modifiers) and len(phrase) > 1:
                        return Anchored(name=" ".join(phrase), anchored_to=message_id)
            return Anchored(name=" ".join(words))
    return Anchored(name=obj)
