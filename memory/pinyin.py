"""Pinyin for concept ids (``memory.ids.concept_id``): exactly what ``pypinyin.lazy_pinyin`` gives (its default
style, forward maximum matching over its phrase dictionary), from a compact table generated from pypinyin
(``pinyin.txt``, ~3 MB in memory, loaded on first use). Importing pypinyin builds its dictionaries and phrase
prefix set as Python objects, ~55 MB in every process that names a concept. A test holds the table and this
module to pypinyin; after a pypinyin upgrade, ``python -m memory.pinyin`` writes the table again."""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterator
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("pinyin.txt")


class _Table:
    """Keys in sorted order with a value each, packed as two strings (each item followed by ``sep``) and their
    offsets: exact lookups, and "is this a prefix of some key", by bisection."""

    def __init__(self, keys: str, values: str, sep: str) -> None:
        self._keys, self._key_at = _offsets(keys, sep)
        self._values, self._value_at = _offsets(values, sep)
        self._n = len(self._key_at) - 1

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:  # the i-th key, for bisect
        return self._keys[self._key_at[i]:self._key_at[i + 1] - 1]

    def get(self, key: str) -> str | None:
        i = bisect.bisect_left(self, key)
        if i < self._n and self[i] == key:
            return self._values[self._value_at[i]:self._value_at[i + 1] - 1]
        return None

    def starts(self, prefix: str) -> bool:
        """Whether some key starts with ``prefix``."""
        i = bisect.bisect_left(self, prefix)
        return i < self._n and self[i].startswith(prefix)


def _offsets(packed: str, sep: str) -> tuple[str, array[int]]:
    """``packed`` (items each followed by ``sep``) and where each item starts, then its end + 1."""
    at = array("I", [0])
    at.extend(m.end() for m in re.finditer(re.escape(sep), packed))
    return packed, at


class _Pinyin:
    def __init__(self, table: bytes) -> None:
        sections = dict(line.split(b"\t", 1) for line in table.splitlines() if not line.startswith(b"#"))
        self.hans = re.compile(sections.pop(b"H").decode())
        chars, phrases = (sections.pop(kind).split(b"\t") for kind in (b"C", b"P"))
        self.chars = _Table(chars[0].decode(), chars[1].decode(), sep=" ")
        self.phrases = _Table(phrases[0].decode(), phrases[1].decode(), sep=",")

    def cut(self, run: str) -> Iterator[str]:
        """A run of Han characters in words: at each point the longest phrase of the dictionary reached while
        extending a prefix of some phrase, else one character (pypinyin's ``mmseg.Seg``, no_non_phrases)."""
        remain = run
        while remain:
            longest = 0
            for end in range(1, len(remain) + 1):
                word = remain[:end]
                if not self.phrases.starts(word):
                    break
                if self.phrases.get(word) is not None:
                    longest = end
            else:
                if not longest:
                    yield from remain
                    return
            if longest:
                yield remain[:longest]
                remain = remain[longest:]
            else:
                yield remain[0]
                remain = remain[1:]

    def lazy_pinyin(self, text: str) -> list[str]:
        out: list[str] = []
        for run in _runs(text, self.hans):
            if not self.hans.match(run):
                out.append(run)
                continue
            for word in self.cut(run):
                phrase = self.phrases.get(word)
                if phrase is not None:
                    out.extend(phrase.split(" "))
                else:
                    out.extend(self.chars.get(c) or c for c in word)
        return out


def _runs(text: str, hans: re.Pattern[str]) -> Iterator[str]:
    start = 0
    for i in range(1, len(text)):
        if bool(hans.match(text[i])) != bool(hans.match(text[i - 1])):
            yield text[start:i]
            start = i
    if text:
        yield text[start:]


@cache
def _loaded() -> _Pinyin:
    return _Pinyin(TABLE.read_bytes())


def lazy_pinyin(text: str) -> list[str]:
    """``pypinyin.lazy_pinyin(text)``: each Han character's pinyin without tones (ü as v), read as part of the
    longest dictionary phrase where one matches; anything else as it is, a run at a time."""
    return _loaded().lazy_pinyin(text)


def build() -> str:
    """The table, from the installed pypinyin (a development dependency)."""
    import pypinyin
    from pypinyin.constants import PHRASES_DICT, PINYIN_DICT, RE_HANS

    chars = [chr(code) for code in sorted(PINYIN_DICT) if RE_HANS.match(chr(code))]
    phrases = [phrase for phrase in sorted(PHRASES_DICT) if RE_HANS.match(phrase)]
    return "\n".join([
        f"# pypinyin {pypinyin.__version__}, written by python -m memory.pinyin: H the Han pattern, C characters "
        "and their pinyin, P phrases and theirs; each in sorted order, followed by its separator",
        f"H\t{RE_HANS.pattern}",
        "C\t" + "".join(c + " " for c in chars) + "\t" + "".join(pypinyin.lazy_pinyin(c)[0] + " " for c in chars),
        "P\t" + "".join(p + "," for p in phrases) + "\t" + "".join(" ".join(pypinyin.lazy_pinyin(p)) + ","
                                                                 for p in phrases),
    ]) + "\n"


if __name__ == "__main__":
    TABLE.write_text(build(), encoding="utf-8")
