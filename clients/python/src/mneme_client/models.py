"""The wire models: every body the Mneme HTTP API answers with — the server declares its responses with these
classes and the client parses them. pydantic and the standard library only.

The server's library keeps its own domain classes and returns them; each route declares the class here as its
``response_model`` and FastAPI reads the domain object into it by attribute (the server's tests hold the fields,
and the enums' members, equal). The request bodies validate with the server's rules and live with the server;
the client sends plain JSON.

No class here has a docstring of its own unless its schema should carry it: it becomes the schema's description
in the OpenAPI document.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

#: The one id pattern (user, session, message, device, operator ids): the library's ``memory.models.ID_PATTERN``.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
ID_RULE = "1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit"
Id = Annotated[str, Field(pattern=ID_PATTERN, examples=["u_42"], description=ID_RULE)]


class Role(StrEnum):
    """Who wrote a message: the user, the assistant, the agent's instructions (system) or a tool's output (tool).
    Only the user's and the assistant's words become long-term memory; system and tool messages stay in the
    session's working memory."""

    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class EventType(StrEnum):  # what each one means: memory.models.EventType
    """The closed set of episodic event types. Anything else is refused."""

    greeting = "greeting"
    small_talk = "small_talk"
    question = "question"
    statement = "statement"
    age_declaration = "age_declaration"
    identity = "identity"
    preference = "preference"
    dislike = "dislike"
    concept_confusion = "concept_confusion"
    request = "request"
    emotion = "emotion"
    goal = "goal"
    operation_failure = "operation_failure"
    plan = "plan"
    feedback = "feedback"


#: A relation's name; which relations exist is the deployment's vocabulary (GET /v1/vocabulary).
RELATION_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
RelationName = Annotated[str, Field(pattern=RELATION_PATTERN, examples=["likes"],
                                    description="A relation of the deployment's vocabulary (GET /v1/vocabulary).")]


class FactSource(StrEnum):
    rule = "rule"
    llm = "llm"
    human = "human"
    counter_evidence = "counter_evidence"


class Status(StrEnum):  # a belief's
    active = "active"
    retired = "retired"
    deleted = "deleted"
    superseded = "superseded"
    in_review = "in_review"


class Wire(BaseModel):
    # read from the library's object of the same shape too (a handler nests one in a wire body)
    model_config = ConfigDict(from_attributes=True)


# working memory


class StoredMessage(Wire):
    message_id: str
    session_id: str
    role: Role
    content: str
    client_ts: float
    received_at: float
    device_id: str | None = None
    truncated: bool = False
    version: int
    seq: int


class SessionView(Wire):
    session_id: str
    head: int
    version: int
    messages: list[StoredMessage]


class FullMessage(Wire):
    message_id: str
    session_id: str
    role: Role
    content: str = Field(description="The full cleaned text, even when working memory holds it cut.")
    truncated: bool
    client_ts: float
    version: int


class MessageAccepted(Wire):
    job_id: str
    version: int
    session_id: str
    message_id: str
    duplicate: bool = Field(description="True when this message_id was accepted before (a retry).")
    in_window: bool = Field(description="False when client_ts is older than the whole working window.")
    client_ts: float = Field(description="The timestamp used for ordering (after clamping).")
    window: SessionView | None = Field(None, description="With `?window=true`: the session's window at the new "
                                                         "head, read in the same step as the append.")


BATCH_MAX = 100  #: messages a POST /v1/messages/batch (``remember_many``) takes at most


class MessagesAccepted(Wire):
    accepted: list[MessageAccepted] = Field(description="One answer a message, in the order they were sent.")


class RolledBack(Wire):
    session_id: str
    version: int
    restored: int | None = Field(description="The version whose snapshot was restored (``to_version``); "
                                             "None for an undo, which takes one message out of the head's.")
    removed: list[StoredMessage] = Field(description="The messages the new version no longer holds: retracted, "
                                                     "with what long-term memory made of them.")


class JobStatus(Wire):
    job_id: str
    tenant: str
    state: str
    user_id: str
    session_id: str
    message_id: str
    accepted_at: float
    finished_at: float | None = None
    stages: dict[str, float]
    event_ids: list[str]
    embed_batch: int | None = Field(None, description="How many messages shared the model call that embedded it.")
    merged: int | None = Field(None, description="How many of its events merged into similar earlier events.")
    llm: str | None = Field(None, description="The LLM stage's outcome (ok, timeout, malformed, …) if it ran.")
    error: str | None = None
    note: str | None = Field(None, description="Why the job ended early (consent off, user erased, or its "
                                               "message retracted: state 'retracted' once nothing of it is left).")


# recall


class EventHit(Wire):
    event_id: str = Field(description="This message's event (feedback targets it).")
    merged_into: str | None = Field(None, description="The live event this message was merged into, if any.")
    event_type: EventType
    tier: str = Field(description="'event': in the live event layer (or merged into one of its events); 'deep': "
                                  "let go of by the cap, kept verbatim in the deep tier.")
    role: Role
    summary: str
    keywords: list[str]
    text: str | None = Field(None, description="The full message text, when asked for with include_text.")
    session_id: str
    ts: float
    confidence: float
    count: int
    message_ids: list[str] = Field(description="The message this memory is.")
    purposes: list[str] = Field(description="The purposes this memory serves: collected under a grant that stands.")
    score: float = Field(description="What the hits are ordered by: relevance times the weights in ``why``.")
    relevance: float = Field(description="How well the message matches the query, 0-1 (vector_weight x similarity "
                                         "+ keyword_weight x keyword); what min_relevance thresholds.")
    weak: bool = Field(description="Neither the similarity nor the keyword score reached the weak line: likely "
                                   "unrelated to the query.")
    why: dict[str, float] = Field(description="Score parts: keyword, vector_sim (cosine), similarity (above the "
                                              "embedder's chance level), weight (feedback), noise, type_match, "
                                              "in_time_window, recency.")


class FactHit(Wire):
    rel_id: str
    subject: str
    relation: RelationName
    object: str
    confidence: float = Field(description="Effective confidence: decayed to now.")
    source: FactSource
    message_ids: list[str]
    event_ids: list[str]
    devices: list[str]
    purposes: list[str] = Field(description="The purposes this belief serves (those of its supporting claims).")
    updated_at: float
    why: str = Field(description="Why recall chose it.")
    explanation: str = Field(description="How its confidence came to be.")


class RecallResult(Wire):
    user_id: str
    query: str
    purpose: str | None = Field(None, description="The purpose the recall serves (none named: any purpose granted).")
    inferred_types: list[EventType] = Field(default_factory=list)
    working: list[StoredMessage]
    events: list[EventHit]
    facts: list[FactHit]
    degraded: dict[str, str] = Field(default_factory=dict, description="Layers that could not answer, and why.")
    notes: list[str] = Field(default_factory=list, description="What the caller should know, e.g. that nothing "
                                                               "in memory matched well enough.")
    took_ms: float


class FeedbackResult(Wire):
    target: str
    weight: float | None = None
    confidence: float | None = None


class Metrics(Wire):
    messages: int
    sessions: int
    users: int
    session_depth: float
    cross_session_retention: float
    task_success_rate: float
    memory_interference_rate: float | None
    feedback: int


# semantic memory


class Belief(Wire):
    rel_id: str
    subject: str
    relation: RelationName
    category: str
    object: str
    concept_id: str
    confidence: float = Field(description="Effective: decayed to now.")
    stored_confidence: float
    half_life_days: float
    source: FactSource
    status: Status
    updated_at: float
    message_ids: list[str]
    event_ids: list[str]
    devices: list[str]
    purposes: list[str] = Field(description="The purposes it serves: those its supporting claims were collected "
                                            "under, while their grants stand.")
    why: str = Field(description="How the current value came to be, step by step.")


class HistoryStep(Wire):
    """One step of a belief's confidence: a claim, counter-evidence, a correction, a re-score, a status change."""

    at: float = Field(description="When it was applied (server time).")
    action: str = Field(description="merge:blend | merge:max | merge:human | counter | rescore | delete | retire | "
                                    "supersede | hold | restore | ignored")
    source: FactSource
    before: float | None
    after: float | None
    message_ids: list[str]
    explanation: str


class BeliefHistory(Wire):
    """How a belief's confidence moved: its steps, oldest first, and what it decays from now on."""

    rel_id: str
    relation: RelationName
    object: str
    status: Status
    stored_confidence: float = Field(description="The confidence at ``base_ts``; decay runs from there.")
    base_ts: float = Field(description="When the decay clock last restarted.")
    half_life_days: float
    steps: list[HistoryStep]


class PageLink(Wire):
    url: str = Field(description="The user's memory page: open it in a browser (the token is in the fragment, "
                                 "which no server sees).")
    token: str = Field(description="The page's credential: this user's page only, until expires_at.")
    expires_at: float


class Claim(Wire):
    rel_id: str
    relation: str
    object: str
    confidence: float
    devices: list[str]


class Review(Wire):
    review_id: str
    tenant: str
    user_id: str
    kind: str  # "contradiction" | "cross_device" | "human_correction" | "less_sure"
    claims: list[Claim]
    evidence_id: str
    created_at: float
    status: str = "open"
    kept: list[str] | None = None
    resolved_by: str | None = None


class Profile(Wire):
    user_id: str
    beliefs: list[Belief]
    open_reviews: list[Review]
    known: bool = Field(True, description="false: nothing is stored for this user id in this tenant — never was "
                                          "(a new user, or a mistyped id), or all of it was erased; beliefs and "
                                          "open_reviews are then empty.")


# privacy


class Policy(Wire):
    user_id: str
    long_term: bool
    consent_required: bool
    purposes: list[str] = Field(default_factory=list, description="The purposes the user granted.")
    withdrawn_purposes: list[str] = Field(default_factory=list, description="Purposes granted once, withdrawn since.")
    consent_changed_at: float | None = None
    consent_by: str | None = None
    child: bool = False
    child_by: str | None = None

    @property
    def keeps_long_term(self) -> bool:  # as ``memory.state.policy.Policy`` reads it
        return (self.long_term or not self.consent_required) and bool(self.purposes)


class Receipt(Wire):
    user: str = Field(description="The hashed user id: the receipt itself holds no personal data.")
    erased_at: float
    removed: dict[str, int]
    remaining: dict[str, int] = Field(description="Anything still found after the erasure (should be all 0).")
    complete: bool


class DeletionReceipt(Wire):
    """What a deletion removed from long-term memory, and what it did to the beliefs those messages stood for."""

    event_type: EventType | None = Field(None, description="The type deleted, for a deletion by type.")
    session_id: str | None = Field(None, description="The session deleted, for a deletion of a session.")
    purposes: list[str] = Field(default_factory=list, description="The purposes withdrawn, for a withdrawal.")
    deleted_events: int
    archived_events: int = Field(0, description="Archived events removed from cold storage.")
    messages: list[str] = Field(description="Messages long-term memory no longer holds anything of.")
    beliefs_removed: list[str] = Field(description="Beliefs (rel ids) only those messages supported: retired.")
    beliefs_rescored: list[str] = Field(description="Beliefs others support too: re-scored from what remains.")
    beliefs_restored: list[str] = Field(description="Values one of the messages had replaced: active again.")


class ConsentChange(Policy):
    """The user's consent after a change, and what withdrawing purposes removed, if the change withdrew any."""

    withdrawal: DeletionReceipt | None = Field(None, description="What serves no purpose any more was removed: "
                                                                 "episodic events, archived events, and beliefs "
                                                                 "removed or re-scored.")


class Purposes(Wire):
    purposes: list[str] = Field(description="The purposes a user of this deployment consents to one by one "
                                            "(MNEME_PURPOSES).")


class SessionSummary(Wire):
    """One of a user's sessions still in working memory, as a listing shows it."""

    session_id: str
    version: int = Field(description="The head version (rollback goes back from it).")
    messages: int = Field(description="Messages in the window at head.")
    first_ts: float | None = Field(description="client_ts of the window's oldest message.")
    last_ts: float | None = Field(description="client_ts of its newest message.")


class Sessions(Wire):
    user_id: str
    sessions: list[SessionSummary]
    next_cursor: str | None = Field(None, description="Pass as cursor for the next page; none: this was the last.")


class ListedEvent(Wire):
    """One row of a user's episodic memory as a listing shows it (``GET /v1/users/{id}/events``)."""

    event_id: str
    event_type: EventType
    role: Role
    tier: str = Field(description="'event': in the live event layer (or merged into one of it); 'deep': let go "
                                  "of by the cap, still searchable.")
    status: str = Field(description="live, merged (into canonical_id) or evicted.")
    canonical_id: str | None = None
    session_id: str
    ts: float
    confidence: float
    count: int
    weight: float
    noise: float
    message_ids: list[str]
    collected_under: list[str] = Field(description="The grants it was collected under (purpose#grant; * before "
                                                   "purposes were recorded).")
    summary: str | None = Field(description="None once the user's key is destroyed.")
    keywords: list[str]
    text: str | None = Field(None, description="The message's full text, when asked for.")


class Events(Wire):
    user_id: str
    events: list[ListedEvent]
    next_cursor: str | None = Field(None, description="Pass as cursor for the next page; none: this was the last.")


class VocabularyRelation(Wire):
    name: str
    category: str
    half_life_days: float = Field(description="The belief's confidence halves this often without new evidence.")
    single_valued: bool = Field(description="A user holds one value at a time: a new one supersedes the old.")
    opposite: str | None = Field(None, description="The relation a claim of this one is counter-evidence to.")
    description: str


class VocabularyOut(Wire):
    relations: list[VocabularyRelation]
    source: str = Field(description="The file it was read from (MNEME_VOCABULARY_FILE, or the default).")


class Read(Wire):
    id: str
    ts: float
    action: str = Field(description="read.recall, read.profile, read.list (sessions, events) or read.export.")
    operator_id: str = Field(description="Who read: the API key's id ('development' with auth off; 'cli').")
    agent: str | None = Field(None, description="The agent the caller named in X-Mneme-Agent.")
    source: str = Field(description="Through what: api or cli.")
    session_id: str | None = None
    purpose: str | None = Field(None, description="The purpose the read named (a recall or a profile read).")
    shown: dict[str, Any] = Field(description="The ids of what was shown, with why: a recall's messages, events "
                                              "(score parts) and beliefs; a profile's beliefs and reviews; an "
                                              "export's count per store. Never content.")


class Reads(Wire):
    user_id: str
    reads: list[Read]
    next_before: float | None = Field(description="Pass as before for the next page; null on the last.")


# ops and errors


class Health(Wire):
    status: str
    backends: dict[str, str]


class ErrorBody(Wire):
    error: str
    message: str
    details: list[Any] | None = None  # the 422 problems; any items, as the OpenAPI document says
