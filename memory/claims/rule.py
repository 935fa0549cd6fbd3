"""A belief a message states (``Claim``), the rule that finds one (``Rule``), and how sure a rule family is."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memory.models import EventType

#: Each rule family's measured precision on the labelled set, (right + 1) / (made + 2) so that a family never
#: seen wrong still starts below certainty and one seldom seen near the middle, at most 0.95 (a human's word):
#: a belief's first confidence. ``make bench-beliefs`` prints the figures this table is read from (by rule family)
#: and the calibration they give; measured 2026-12-05 over 820 turns (600 of the four dev sets, 220 cases).
CONFIDENCE: dict[str, float] = {
    "age": 0.88, "name": 0.86, "location": 0.89, "hometown": 0.8, "occupation": 0.94, "family": 0.95,
    "likes": 0.83, "dislikes": 0.94, "favourite": 0.75, "goal": 0.75, "emotion": 0.91, "product": 0.89,
    "school": 0.8, "grade": 0.88, "style": 0.75, "response": 0.75, "obstacle": 0.62, "mastery": 0.86, "subject": 0.67,
    "language": 0.83, "vocabulary": 0.95,
}

Read = Callable[[str], list[str]]  # a rule's matched group → its object(s), none when it is not a whole phrase


@dataclass(frozen=True)
class Rule:
    """Where ``pattern`` matches a clause, ``read`` of its first group gives objects of ``relation``."""

    family: str
    relation: str
    event_type: EventType
    pattern: re.Pattern[str]
    read: Read


@dataclass(frozen=True)
class Claim:
    """One belief a message states: ``relation`` → ``object``, found by rule ``family``."""

    relation: str
    object: str
    family: str
    event_type: EventType

    @property
    def confidence(self) -> float:
        return CONFIDENCE.get(self.family, CONFIDENCE["vocabulary"])
