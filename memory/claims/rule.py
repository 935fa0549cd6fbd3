"""A belief a message states (``Claim``), the rule that finds one (``Rule``), and how sure a rule family is."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memory.models import EventType

#: Measured precision of each rule family on the labelled set (``make bench-beliefs`` prints it per family):
#: a belief's first confidence, (right + 1) / (made + 2) so a family never measured wrong still starts below
#: certainty and a family seldom seen starts near the middle.
CONFIDENCE: dict[str, float] = {
    "age": 0.9, "name": 0.9, "location": 0.85, "hometown": 0.8, "occupation": 0.85, "family": 0.9, "likes": 0.8,
    "dislikes": 0.8, "favourite": 0.85, "goal": 0.75, "emotion": 0.7, "product": 0.75, "school": 0.85,
    "grade": 0.85, "response": 0.8, "obstacle": 0.7, "mastery": 0.6, "subject": 0.8, "vocabulary": 0.75,
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
