"""What each relation means for belief keeping: its category (which sets its half-life), whether a
user holds one value at a time, and which relation contradicts it.

| relation            | category   | single value | opposite          |
|---------------------|------------|--------------|-------------------|
| age, name, grade, school | profile | yes        |                   |
| likes               | preference |              | dislikes          |
| dislikes            | preference |              | likes             |
| learning_style, subject_preference, response_preference | preference | | |
| mastery             | knowledge  |              | learning_obstacle |
| learning_obstacle   | knowledge  |              | mastery           |
| emotion_state       | emotion    |              |                   |
| goal                | goal       |              |                   |

Half-lives per category come from settings (``MNEME_HALF_LIFE_DAYS``, JSON): profile 365 d, preference
90 d, emotion 1 d, anything else the default 30 d.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.errors import InvalidInput
from memory.models import Relation
from memory.settings import Settings


@dataclass(frozen=True)
class RelationSpec:
    category: str
    single_valued: bool = False
    opposite: Relation | None = None


VOCABULARY: dict[Relation, RelationSpec] = {
    Relation.age: RelationSpec("profile", single_valued=True),
    Relation.name: RelationSpec("profile", single_valued=True),
    Relation.grade: RelationSpec("profile", single_valued=True),
    Relation.school: RelationSpec("profile", single_valued=True),
    Relation.likes: RelationSpec("preference", opposite=Relation.dislikes),
    Relation.dislikes: RelationSpec("preference", opposite=Relation.likes),
    Relation.learning_style: RelationSpec("preference"),
    Relation.subject_preference: RelationSpec("preference"),
    Relation.response_preference: RelationSpec("preference"),
    Relation.mastery: RelationSpec("knowledge", opposite=Relation.learning_obstacle),
    Relation.learning_obstacle: RelationSpec("knowledge", opposite=Relation.mastery),
    Relation.emotion_state: RelationSpec("emotion"),
    Relation.goal: RelationSpec("goal"),
}


def relation(value: str) -> Relation:
    """The relation named ``value``, or a clear error listing the vocabulary."""
    try:
        return Relation(value)
    except ValueError:
        raise InvalidInput(
            f"unknown relation {value!r}; the vocabulary is: {', '.join(r.value for r in Relation)}"
        ) from None


def spec(rel: Relation) -> RelationSpec:
    return VOCABULARY[rel]


def half_life_days(rel: Relation, settings: Settings) -> float:
    category = VOCABULARY[rel].category
    return float(settings.half_life_days.get(category, settings.half_life_days.get("default", 30.0)))


def decayed(confidence: float, age_days: float, half_life: float) -> float:
    """Effective confidence: stored × 0.5^(age / half-life)."""
    factor: float = 0.5 ** (max(0.0, age_days) / half_life)
    return confidence * factor
