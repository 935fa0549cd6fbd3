"""The request bodies the API reads. They stay with the server, not in :mod:`mneme_client.models`, because they
validate with the library's rules: the id pattern (``memory.models.Id``), how ``client_ts`` is read
(``ClientTs``), how a belief's object is cleaned (``BeliefObject``, through ``memory.text``). The client sends
plain JSON and needs none of it. (``POST /v1/feedback`` reads the library's own ``memory.feedback.FeedbackIn``.)

An enum is read as the wire enum — one schema per name in the OpenAPI document, shared with the responses —
and handed to the handler as the library's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mneme_client import models as schemas
from mneme_client.models import BATCH_MAX
from pydantic import AfterValidator, BaseModel, Field, model_validator

from memory import models
from memory.models import BeliefObject, ClientTs, Id, RelationName
from memory.purposes import NAME

if TYPE_CHECKING:  # what a handler holds once the body is read: the library's enum, an epoch float
    from typing import TypeAlias

    Role: TypeAlias = models.Role
    EventType: TypeAlias = models.EventType
    Seconds: TypeAlias = float
else:
    Role = Annotated[schemas.Role, AfterValidator(models.Role)]
    EventType = Annotated[schemas.EventType, AfterValidator(models.EventType)]
    Seconds = ClientTs


#: A purpose's name; which purposes exist is the deployment's (``MNEME_PURPOSES``), checked by the handler.
Purpose = Annotated[str, Field(pattern=NAME.pattern, examples=["tutoring"],
                               description="A purpose of this deployment (GET /v1/purposes).")]


class MessageIn(BaseModel):
    user_id: Id
    session_id: Id
    device_id: Id | None = None
    message_id: Id = Field(description="The client's id; sending it again is a harmless retry.")
    role: Role
    content: str = Field(min_length=1)
    client_ts: Seconds = Field(
        description="When the message was written: ISO 8601 or unix seconds (milliseconds accepted), "
                    "from 2000-01-01 to at most a day from now."
    )


class MessagesIn(BaseModel):
    messages: list[MessageIn] = Field(min_length=1, max_length=BATCH_MAX, description=(
        f"1 to {BATCH_MAX} messages, of any sessions and users of the tenant, accepted in this order."))


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
    purpose: Purpose | None = Field(None, description="The purpose this recall serves: only memories collected "
                                                      "under a grant of it are returned. Omitted: any purpose the "
                                                      "user granted.")
    query: str = Field(min_length=1, max_length=10_000, description="A question, or a few turns of dialogue "
                                                                     "(`user: …` lines): the latest user turn leads.")
    k: int = Field(5, ge=1, le=50)
    event_types: list[EventType] | None = None
    include_text: bool = Field(False, description="Return each event's full (decrypted) message text.")
    min_relevance: float = Field(0.0, ge=0, le=1, description="Leave out events whose relevance is below this "
                                                              "(0: the best k whenever the user has memories; each "
                                                              "event carries its relevance and a weak flag).")


class BeliefIn(BaseModel):
    relation: RelationName
    object: BeliefObject
    confidence: float = Field(0.95, ge=0.1, le=1.0)
    operator_id: Id = Field("user", description="Who is making the correction (the user, a teacher, an agent).")


class ResolveIn(BaseModel):
    keep: list[Id] = Field(description="rel_ids of the claims that are true; the others are deleted.")
    operator_id: Id = "user"


class ConsentIn(BaseModel):
    long_term: bool = Field(description="true: keep episodic and semantic memory; false: a pause — working memory "
                                        "only, long-term memory kept but not recalled.")
    purposes: list[Purpose] | None = Field(
        None, description="The purposes granted (GET /v1/purposes). Omitted: every purpose with long_term true, the "
                          "purposes as they are with false. A purpose granted before and not named now is withdrawn: "
                          "what then serves no purpose is removed (the answer's withdrawal lists it).")
    operator_id: Id = "user"


class ChildIn(BaseModel):
    child: bool = Field(description="true: under 13 — no graph writes, content-free events, encrypted window.")
    operator_id: Id = "user"
