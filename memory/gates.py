"""What a regular expression needs of a text before it can match there: a few literal strings, one of which
every match holds (``gate_of``). Extraction tries some eighty patterns on each user message, and most
messages hold none of their words: a substring test turns a pattern away in a fraction of the time a failed
search takes (a pattern that opens on ``\\b`` or is case-insensitive is tried at every position).

The strings come from the pattern itself, read with the standard library's own parser of patterns, so a
deployment's vocabulary file gains them with no work: the longest run of literal characters the pattern cannot
match without, or the alternatives of a group it cannot match without, whichever is the more selective. A
pattern that needs no literal (``\\d+``) has no gate and is always tried. A gate is a necessary condition,
never a sufficient one: the pattern is still searched where a gate admits the text.

Case-insensitive parts are compared in ``fold``-ed text: lower-cased as the regular-expression engine does
(one character for one: İ is i, not i + a combining dot) and with the characters it also takes for one another
under IGNORECASE (ı and i, ſ and s, ς and σ, K and k, …) made one."""

from __future__ import annotations

import re
from collections.abc import Iterable
from re import _casefix, _constants, _parser  # type: ignore[attr-defined]  # the stdlib's parser of patterns
from typing import Any, NamedTuple

# every character the engine takes for another under IGNORECASE (beyond lower-casing), as one of its class
_CLASSES = [{key, *extras} for key, extras in _casefix._EXTRA_CASES.items()]  # noqa: SLF001
_SAME = {member: min(cls) for cls in _CLASSES for member in cls}
_FOLD = str.maketrans({chr(member): chr(canonical) for member, canonical in _SAME.items() if member != canonical})
_FOLDS = frozenset(chr(code) for code in _FOLD)
_BEFORE = str.maketrans({"\u0130": "i"})  # İ: the engine lowers it to i; str.lower to i + U+0307


def fold(text: str) -> str:
    """``text`` lower-cased character for character as case-insensitive matching compares it."""
    lowered = text.translate(_BEFORE).lower() if "\u0130" in text else text.lower()
    return lowered.translate(_FOLD) if not _FOLDS.isdisjoint(lowered) else lowered


class Gate(NamedTuple):
    """One of ``exact`` as it is in the text, or one of ``folded`` in the text's ``fold``."""

    exact: tuple[str, ...]
    folded: tuple[str, ...]


class Gates:
    """The gates of many patterns as one index: which of them a text holds a needed string of
    (``admitted``), in a few set operations and a substring test for each needed string that begins with a
    character of the text, however many patterns there are."""

    def __init__(self, patterns: Iterable[re.Pattern[str]]) -> None:
        gates = [gate_of(pattern) for pattern in patterns]
        self._none = [gate is None for gate in gates]  # patterns that need no literal: always tried
        exact: dict[str, list[int]] = {}
        folded: dict[str, list[int]] = {}
        for at, gate in enumerate(gates):
            for needed in gate.exact if gate else ():
                exact.setdefault(needed, []).append(at)
            for needed in gate.folded if gate else ():
                folded.setdefault(needed, []).append(at)
        self._exact, self._folded = _by_first(exact), _by_first(folded)

    def admitted(self, text: str) -> list[bool]:
        """For each pattern, in the order given, whether it is worth searching ``text`` for: the text holds
        a string it needs, or it needs none. (Flags by position, not a set of patterns: a compiled pattern
        hashes its whole program each time it is looked up.)"""
        flags = self._none.copy()
        for source, index in ((text, self._exact), (fold(text), self._folded)):
            for first in index.keys() & set(source):
                for needed, positions in index[first]:
                    if needed in source:
                        for at in positions:
                            flags[at] = True
        return flags


def _by_first(needed: dict[str, list[int]]) -> dict[str, list[tuple[str, list[int]]]]:
    by_first: dict[str, list[tuple[str, list[int]]]] = {}
    for string, positions in needed.items():
        by_first.setdefault(string[0], []).append((string, positions))
    return by_first


def gate_of(pattern: re.Pattern[str]) -> Gate | None:
    """The literal strings one of which every match of ``pattern`` holds; None if it needs none."""
    parsed = _parser.parse(pattern.pattern, pattern.flags)  # it compiled, so it parses
    needed = _needs(parsed.data, bool(pattern.flags & re.IGNORECASE))
    if not needed:
        return None
    exact = tuple(sorted(s for s, ci in needed if not ci))
    folded = tuple(sorted({fold(s) for s, ci in needed if ci}))
    return Gate(exact, folded)


_Needs = frozenset[tuple[str, bool]]  # alternatives: (a string, compared case-insensitively)
_REPEATS = {_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT}


def _needs(items: Any, ci: bool) -> _Needs | None:
    """Of a sequence of parsed items, the most selective set of alternatives one of which a match holds."""
    found: list[_Needs] = []
    run: list[str] = []  # literal characters in a row

    def end_run() -> None:
        if run:
            found.append(frozenset({("".join(run), ci)}))
            run.clear()

    for op, arg in items:
        if op is _constants.LITERAL:
            run.append(chr(arg))
            continue
        end_run()
        needed: _Needs | None = None
        if op is _constants.SUBPATTERN:
            _group, on, off, inner = arg
            needed = _needs(inner.data, (ci or bool(on & re.IGNORECASE)) and not off & re.IGNORECASE)
        elif op in _REPEATS and arg[0] >= 1:
            needed = _needs(arg[2].data, ci)
        elif op is _constants.ATOMIC_GROUP:
            needed = _needs(arg.data, ci)
        elif op is _constants.BRANCH:
            each = [_needs(alternative.data, ci) for alternative in arg[1]]
            if all(each):
                needed = frozenset().union(*(e for e in each if e))
        elif op is _constants.IN and arg and all(o is _constants.LITERAL for o, _ in arg):
            needed = frozenset((chr(c), ci) for _, c in arg)
        if needed:
            found.append(needed)
    end_run()
    return max(found, key=_selectivity, default=None)


def _selectivity(needed: _Needs) -> tuple[int, int]:
    """The longer the shortest alternative, the fewer texts hold one; then the fewer alternatives."""
    return min(len(s) for s, _ in needed), -len(needed)
