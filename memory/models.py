"""Domain models shared by the library, the tasks (as JSON) and the HTTP API."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class Role(StrEnum):
    user = "user"
    assistant = "assistant"


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


class Relation(StrEnum):
    """The closed vocabulary of user→concept relations; ``memory.vocabulary`` gives each its category.
    Anything else is refused."""

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


class Event(EventBase):
    keywords: list[str] = Field(max_length=3)
    summary: str = Field(max_length=50)
    tokens: list[str] = Field(default_factory=list, description="Search tokens (zh words, en words).")


class Fact(BaseModel):
    """One piece of evidence for a user→concept relation."""

    tenant: str
    user_id: str
    relation: Relation
    object: str = Field(min_length=1, max_length=100)
    confidence: float = Field(ge=0.1, le=1.0)
    source: FactSource = FactSource.rule
    evidence_id: str  # the event it came from: applying the same evidence twice has no effect
    message_ids: list[str]
    ts: float
    device_id: str | None = None
    session_id: str | None = None


class Extraction(BaseModel):
    events: list[Event]
    facts: list[Fact]
