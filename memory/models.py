"""Domain models shared by the library, the tasks (as JSON) and the HTTP API, and the rules every input
meets: the id and tenant patterns, how ``client_ts`` is read, how a belief's object is cleaned."""

from __future__ import annotations

import html
import math
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from memory.purposes import ANY
from memory.text import clean_label

#: The one id pattern: user, session, message, device and operator ids, in request bodies and URL paths alike.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
ID_RULE = "1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit"
#: A tenant name is an id without ':'. The tenant leads every key (``mneme:user:{tenant}:{user_id}``), so a
#: ':' in it would make tenant "a:b" with user "c" share keys with tenant "a" with user "b:c".
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$"
TENANT_RULE = "1-128 characters: letters, digits and _ . @ -, starting with a letter or digit (no ':')"

Id = Annotated[str, Field(pattern=ID_PATTERN, examples=["u_42"], description=ID_RULE)]

EARLIEST_CLIENT_TS = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
CLIENT_TS_AHEAD_S = 86_400  # a little ahead is clock skew (clamped when appended); over a day is a mistake
_CLIENT_TS_RULE = ("must be unix seconds or milliseconds or an ISO 8601 datetime, "
                   "from 2000-01-01 to at most a day from now")


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool):  # JSON true would otherwise be read as 1.0, i.e. 1970
        raise ValueError(f"true/false is not a time; it {_CLIENT_TS_RULE}")
    return value


def _epoch_seconds(value: datetime | float) -> float:
    """Unix seconds; a number above 10¹¹ (the year 5138 in seconds) is milliseconds, a naive datetime is UTC."""
    try:
        if isinstance(value, datetime):
            seconds = (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
        else:
            seconds = value / 1000 if value > 1e11 else float(value)
    except (OverflowError, ValueError):  # a datetime at the edge of year 1 or 9999 with an offset
        seconds = math.nan
    if not (math.isfinite(seconds) and EARLIEST_CLIENT_TS <= seconds <= time.time() + CLIENT_TS_AHEAD_S):
        raise ValueError(_CLIENT_TS_RULE)
    return seconds


#: ``client_ts`` as sent (ISO 8601, or unix seconds or milliseconds), validated to unix seconds.
ClientTs = Annotated[datetime | float, BeforeValidator(_not_a_bool), AfterValidator(_epoch_seconds)]


OBJECT_MAX_CHARS = 100


def _cleaned_object(value: str) -> str:
    text = clean_label(value)
    if not text:
        raise ValueError("is empty once control characters are removed: send some text")
    if len(html.unescape(text)) > OBJECT_MAX_CHARS:  # measured as read, not as escaped: cleaning twice is the same
        raise ValueError(f"is longer than {OBJECT_MAX_CHARS} characters: send a shorter name for it")
    return text


#: A belief's object, as every source gives it (rules, the LLM stage, a correction, a task rebuilding a fact):
#: 1-100 characters as read, stored cleaned like every text (``memory.text.clean``: no controls or bidi
#: overrides, HTML-escaped).
BeliefObject = Annotated[str, AfterValidator(_cleaned_object)]


class Role(StrEnum):
    """Who wrote a message: the user, the assistant, the agent's instructions (system) or a tool's output (tool).
    Only the user's and the assistant's words become long-term memory; system and tool messages stay in the
    session's working memory."""

    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


#: Roles whose messages long-term memory is made of.
REMEMBERED_ROLES = frozenset({Role.user, Role.assistant})


class EventType(StrEnum):
    """The closed set of episodic event types. Anything else is refused."""

    greeting = "greeting"  # 你好 / hi
    small_talk = "small_talk"  # chit-chat with nothing to remember
    question = "question"  # the user asks something
    statement = "statement"  # a plain statement (user or assistant) that fits nothing narrower
    age_declaration = "age_declaration"  # 我今年17岁 / I'm 17
    identity = "identity"  # name, grade, school
    preference = "preference"  # likes, preferred ways of learning or answering
    dislike = "dislike"  # 我讨厌… / I can't stand…
    concept_confusion = "concept_confusion"  # 我总把加速度和速度搞混 / I don't get X
    request = "request"  # 请… / please…, an explicit instruction to the agent
    emotion = "emotion"  # 我好累 / I'm stressed
    goal = "goal"  # 我想考上… / I want to…
    operation_failure = "operation_failure"  # 点了没反应 / it crashed
    plan = "plan"  # a plan or solution the assistant gave
    feedback = "feedback"  # 这个解释很好 / that didn't help


#: A relation's name. Which relations exist is the deployment's vocabulary (``memory.vocabulary``, a file).
RELATION_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
RelationName = Annotated[str, Field(pattern=RELATION_PATTERN, examples=["likes"],
                                    description="A relation of the deployment's vocabulary (GET /v1/vocabulary).")]


class Relation(StrEnum):
    """The relations the built-in rules find (``memory.extraction``), by name; the vocabulary file says which a
    deployment keeps, and may add others (``memory.vocabulary``)."""

    age = "age"
    name = "name"
    grade = "grade"
    school = "school"
    likes = "likes"
    dislikes = "dislikes"
    learning_style = "learning_style"
    subject_preference = "subject_preference"
    response_preference = "response_preference"
    mastery = "mastery"
    learning_obstacle = "learning_obstacle"
    emotion_state = "emotion_state"
    goal = "goal"


class FactSource(StrEnum):
    rule = "rule"
    llm = "llm"
    human = "human"
    counter_evidence = "counter_evidence"


class Message(BaseModel):
    """One cleaned message as the pipeline sees it (full text, never truncated)."""

    tenant: str
    user_id: str
    session_id: str
    device_id: str | None = None
    message_id: str
    role: Role
    content: str
    client_ts: float  # unix seconds, after clamping
    received_at: float = 0.0  # server time of acceptance: erasure drops work received before it
    version: int = 0


class EventBase(BaseModel):
    """What an event is, in extraction (``Event``) and in the episodic store (``StoredEvent``) alike."""

    event_id: str
    tenant: str
    user_id: str
    session_id: str
    ts: float
    event_type: EventType
    role: Role
    text_hash: str
    message_ids: list[str]
    confidence: float = Field(ge=0.0, le=1.0)
    count: int = 1
    weight: float = Field(1.0, gt=0, description="Retrieval weight: set by extraction, moved by feedback.")
    purposes: list[str] = Field(default_factory=lambda: [ANY], description="The grants it was collected under "
                                "(``memory.purposes``): the purposes it may serve.")


class Event(EventBase):
    keywords: list[str] = Field(max_length=3)
    summary: str = Field(max_length=50)
    tokens: list[str] = Field(default_factory=list, description="Search tokens (zh words, en words).")


class Fact(BaseModel):
    """One piece of evidence for a user→concept relation."""

    tenant: str
    user_id: str
    relation: RelationName
    object: BeliefObject
    confidence: float = Field(ge=0.1, le=1.0)
    source: FactSource = FactSource.rule
    evidence_id: str  # the event it came from: applying the same evidence twice has no effect
    message_ids: list[str]
    ts: float
    device_id: str | None = None
    session_id: str | None = None
    purposes: list[str] = Field(default_factory=lambda: [ANY], description="The grants it was collected under.")


class Extraction(BaseModel):
    events: list[Event]
    facts: list[Fact]
