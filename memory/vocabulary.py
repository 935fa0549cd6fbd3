"""The vocabulary of beliefs, read from a file: which relations Mneme keeps about a user, each relation's
category (which sets how fast its confidence fades), whether a user holds one value at a time, which relation
contradicts it, what it means (told to the LLM stage), and the rules that find it in a message.

The default (``vocabulary.toml`` beside this module) covers a general assistant, tutoring, customer service
and private-domain operations; ``MNEME_VOCABULARY_FILE`` names another, and changing it needs no code change:
the rules (``memory.extraction``: the built-in ones keep to the relations it names, its own patterns add
others), the LLM stage's schema (``memory.llm``), the semantic service (merging, single values, opposites,
decay), the API (an unknown relation is a 400 naming the vocabulary) and the graph adapters all read it.

Loading checks the whole file and fails with one ``ConfigurationError`` naming the file and what to fix: every
name a-z/0-9/_, every relation's category declared, every opposite a relation whose opposite is this one,
every rule's event type one of the closed set and every pattern a regular expression with a group for the
object. Half-lives are days, per category; a relation whose category has none takes
``default_half_life_days``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, model_validator

from memory.errors import ConfigurationError, InvalidInput, described
from memory.models import RELATION_PATTERN, EventType

DEFAULT_FILE = Path(__file__).with_name("vocabulary.toml")
OTHER = "other"  # the category of a stored relation the vocabulary no longer names


class CategoryEntry(BaseModel):
    half_life_days: float = Field(gt=0)
    description: str = ""


class RuleEntry(BaseModel):
    event_type: EventType
    confidence: float = Field(0.8, ge=0.1, le=1.0)
    patterns: list[str] = Field(min_length=1)


class RelationEntry(BaseModel):
    category: str
    single_valued: bool = False
    opposite: str | None = None
    description: str = ""
    rules: list[RuleEntry] = Field(default_factory=list)


class VocabularyFile(BaseModel):
    """The file's shape (TOML)."""

    default_half_life_days: float = Field(30.0, gt=0)
    categories: dict[str, CategoryEntry] = Field(min_length=1)
    relations: dict[str, RelationEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> VocabularyFile:
        names = [*self.categories, *self.relations]
        if bad := [n for n in names if not re.fullmatch(RELATION_PATTERN, n)]:
            raise ValueError(f"names must be 1-32 characters of a-z, 0-9 and _, starting with a letter: {bad}")
        for name, entry in self.relations.items():
            if entry.category not in self.categories:
                raise ValueError(f"relation {name!r} names category {entry.category!r}, which [categories] lacks")
            if entry.opposite is not None and (
                    entry.opposite not in self.relations or self.relations[entry.opposite].opposite != name):
                raise ValueError(f"relation {name!r}: its opposite {entry.opposite!r} must be a relation whose "
                                 f"opposite is {name!r}")
        return self


@dataclass(frozen=True)
class RelationSpec:
    name: str
    category: str
    single_valued: bool = False
    opposite: str | None = None
    description: str = ""


@dataclass(frozen=True)
class PatternRule:
    """A rule the file gives: where ``pattern`` matches a user's message, its first group is an object of
    ``relation``, and the message is an event of ``event_type``."""

    relation: str
    event_type: EventType
    pattern: re.Pattern[str]
    confidence: float


class Vocabulary:
    def __init__(self, parsed: VocabularyFile, rules: tuple[PatternRule, ...], source: str) -> None:
        self.relations = {name: RelationSpec(name, e.category, e.single_valued, e.opposite, e.description)
                          for name, e in parsed.relations.items()}
        self.half_lives = {name: c.half_life_days for name, c in parsed.categories.items()}
        self.default_half_life = parsed.default_half_life_days
        self.rules = rules
        self.source = source

    @classmethod
    def load(cls, path: Path) -> Vocabulary:
        try:
            parsed = VocabularyFile.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
            rules = tuple(PatternRule(name, rule.event_type, _compiled(name, pattern), rule.confidence)
                          for name, entry in parsed.relations.items() for rule in entry.rules
                          for pattern in rule.patterns)
        except (OSError, tomllib.TOMLDecodeError, ValidationError, ValueError) as exc:
            raise ConfigurationError(f"vocabulary file {path}: {described(exc)}") from exc
        return cls(parsed, rules, str(path))

    @property
    def names(self) -> list[str]:
        return sorted(self.relations)

    def knows(self, relation: str) -> bool:
        return relation in self.relations

    def relation(self, value: str) -> str:
        """``value`` if the vocabulary has it, else a clear error listing what it has."""
        if value not in self.relations:
            raise InvalidInput(f"unknown relation {value!r}; this deployment's vocabulary is: {', '.join(self.names)} "
                               "(GET /v1/vocabulary)")
        return value

    def spec(self, relation: str) -> RelationSpec:
        """What the vocabulary says of ``relation``; a relation it no longer names (a belief kept from before the
        file changed) reads as one of its own category, "other", with the default half-life."""
        return self.relations.get(relation) or RelationSpec(relation, OTHER)

    def half_life_days(self, relation: str) -> float:
        return self.half_lives.get(self.spec(relation).category, self.default_half_life)


def _compiled(relation: str, pattern: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"relation {relation!r}: pattern {pattern!r} is not a regular expression: {exc}") from exc
    if compiled.groups < 1:
        raise ValueError(f"relation {relation!r}: pattern {pattern!r} needs a group around the object it finds")
    return compiled


def load_vocabulary(path: str = "") -> Vocabulary:
    """The vocabulary in ``path`` (empty: the default file), read once per process."""
    return _loaded(path or str(DEFAULT_FILE))


@lru_cache(maxsize=8)
def _loaded(path: str) -> Vocabulary:
    return Vocabulary.load(Path(path))


def decayed(confidence: float, age_days: float, half_life: float) -> float:
    """Effective confidence: stored × 0.5^(age / half-life)."""
    factor: float = 0.5 ** (max(0.0, age_days) / half_life)
    return confidence * factor
