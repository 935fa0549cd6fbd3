"""Request and response bodies of the HTTP API, shared by the server and the Python client."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from memory.beliefs import Belief
from memory.models import BeliefObject, ClientTs, EventType, Id, Relation, Role
from memory.reviews import Review
from memory.working import SessionView


class MessageIn(BaseModel):
    user_id: Id
    session_id: Id
    device_id: Id | None = None
    message_id: Id = Field(description="The client's id; sending it again is a harmless retry.")
    role: Role
    content: str = Field(min_length=1)
    client_ts: ClientTs = Field(
        description="When the message was written: ISO 8601 or unix seconds (milliseconds accepted), "
                    "from 2000-01-01 to at most a day from now."
    )


class MessageAccepted(BaseModel):
    job_id: str
    version: int
    session_id: str
    message_id: str
    duplicate: bool = Field(description="True when this message_id was accepted before (a retry).")
    in_window: bool = Field(description="False when client_ts is older than the whole working window.")
    client_ts: float = Field(description="The timestamp used for ordering (after clamping).")
    window: SessionView | None = Field(None, description="With `?window=true`: the session's window at the new "
                                                         "head, read in the same step as the append.")


class RollbackIn(BaseModel):
    to_version: int | None = Field(None, ge=0)
    undo_last: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> RollbackIn:
        if (self.to_version is None) == (not self.undo_last):
            raise ValueError("send exactly one of to_version (a version number) or undo_last: true")
        return self


class RecallIn(BaseModel):
    user_id: Id
    session_id: Id | None = None
    query: str = Field(min_length=1, max_length=10_000, description="A question, or a few turns of dialogue "
                                                                     "(`user: …` lines): the latest user turn leads.")
    k: int = Field(5, ge=1, le=50)
    event_types: list[EventType] | None = None
    include_text: bool = Field(False, description="Return each event's full (decrypted) message text.")


class FullMessage(BaseModel):
    message_id: str
    session_id: str
    role: Role
    content: str = Field(description="The full cleaned text, even when working memory holds it cut.")
    truncated: bool
    client_ts: float
    version: int


class Health(BaseModel):
    status: str
    backends: dict[str, str]


class ErrorBody(BaseModel):
    error: str
    message: str
    details: list | None = None


class BeliefIn(BaseModel):
    relation: Relation
    object: BeliefObject
    confidence: float = Field(0.95, ge=0.1, le=1.0)
    operator_id: Id = Field("user", description="Who is making the correction (the user, a teacher, an agent).")


class ResolveIn(BaseModel):
    keep: list[Id] = Field(description="rel_ids of the claims that are true; the others are deleted.")
    operator_id: Id = "user"


class Profile(BaseModel):
    user_id: str
    beliefs: list[Belief]
    open_reviews: list[Review]


class ConsentIn(BaseModel):
    long_term: bool = Field(description="true: keep episodic and semantic memory; false: working memory only.")
    operator_id: Id = "user"


class ChildIn(BaseModel):
    child: bool = Field(description="true: under 13 — no graph writes, content-free events, encrypted window.")
    operator_id: Id = "user"
