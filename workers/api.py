"""The HTTP enqueue API. Writes go to working memory and the queue; reads never touch the queue.

Run: ``uvicorn workers.api:create_app --factory``. OpenAPI at ``/docs``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import asynccontextmanager
from typing import Annotated

import redis
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory import childmode, feedback, ids, stages
from memory.audit import graph_write_record, record
from memory.beliefs import Belief
from memory.episodic import ALL_STATUSES
from memory.erasure import Receipt, erase_user
from memory.errors import Conflict, InvalidInput, MnemeError, NotFound
from memory.feedback import FeedbackIn, FeedbackResult, Metrics
from memory.jobs import JobStatus
from memory.models import ID_PATTERN, ID_RULE, EventType
from memory.policy import Policy
from memory.recall import RecallResult, recall
from memory.reviews import Review
from memory.runtime import Runtime, get_runtime
from memory.tenants import authenticate
from memory.text import clean
from memory.userhash import user_hash
from memory.working import RolledBack, SessionView
from tasks.envelope import task_message
from workers.celery_app import QUEUES, ROUTES
from workers.logs import request_id
from workers.observability import install
from workers.schemas import (
    BeliefIn,
    ChildIn,
    ConsentIn,
    ErrorBody,
    FullMessage,
    Health,
    MessageAccepted,
    MessageIn,
    Profile,
    RecallIn,
    ResolveIn,
    RollbackIn,
)
from workers.strict_json import StrictJsonRoute, problem

log = logging.getLogger("mneme.api")
ERRORS = {400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody},
          422: {"model": ErrorBody}, 503: {"model": ErrorBody}}


def tenant_of(request: Request) -> str:
    """The caller's tenant: from the API key, or the development tenant when auth is off."""
    rt: Runtime = request.app.state.runtime
    if not rt.settings.auth_required:
        return rt.settings.tenant
    header = request.headers.get("authorization", "")
    secret = header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("x-api-key")
    return authenticate(rt.redis, secret).tenant


Tenant = Annotated[str, Depends(tenant_of)]
PathId = Annotated[str, Path(pattern=ID_PATTERN, description=ID_RULE)]
OperatorId = Annotated[str, Query(pattern=ID_PATTERN, description="Who is acting (the user, a teacher, an agent).")]
EXTRACT_QUEUE = ROUTES["memory.extract"]


def create_app(runtime: Runtime | None = None) -> FastAPI:
    rt = runtime or get_runtime()
    started = time.time()  # a stage that never finished anything is stalled counting from here

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # load the query embedder (and encode once) in the background: /healthz says "loading" until then
        threading.Thread(target=rt.warm_up, name="warm-up", daemon=True).start()
        yield

    app = FastAPI(title="Mneme", version="0.1.0", lifespan=lifespan, responses=ERRORS,
                  description="Memory backend for AI agents: working, episodic and semantic memory.")
    app.router.route_class = StrictJsonRoute  # before any route is added
    app.state.runtime = rt
    install(app, rt.redis)  # JSON logs with request ids, request latency, GET /metrics

    @app.exception_handler(MnemeError)
    async def mneme_error(request: Request, exc: MnemeError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"error": exc.code, "message": exc.message})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Routing and parsing errors (no such route, wrong method, a body that is not JSON) in our shape."""
        codes = {404: "not_found", 405: "method_not_allowed", 400: "invalid_request"}
        return JSONResponse(status_code=exc.status_code, headers=getattr(exc, "headers", None), content={
            "error": codes.get(exc.status_code, "http_error"), "message": str(exc.detail)})

    @app.exception_handler(redis.RedisError)
    async def redis_down(request: Request, exc: redis.RedisError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"error": "backend_unavailable",
                                                      "message": f"working memory unavailable: {exc}"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [problem(e) for e in exc.errors()]
        return JSONResponse(status_code=422, content={
            "error": "invalid_request", "message": "; ".join(f"{p['field']}: {p['msg']}" for p in problems),
            "details": problems,
        })

    @app.post("/v1/messages", status_code=202, response_model=MessageAccepted, tags=["write"])
    def post_message(tenant: Tenant, body: MessageIn, window: bool = False) -> MessageAccepted:
        """Append a message to the session's working memory and queue it for long-term memory. With
        `window=true` the answer carries the session's window too (what an agent puts in its next prompt),
        read in the same Redis step."""
        limit = rt.settings.content_max_chars
        if len(body.content) > limit:
            raise InvalidInput(f"content has {len(body.content)} characters; the limit is {limit}: split it")
        if not clean(body.content):
            raise InvalidInput("content is empty after cleaning: send some text")
        job_id = ids.job_id(tenant, body.session_id, body.message_id)
        if body.device_id:
            rt.devices.bind(tenant, body.device_id, body.user_id)
        # child mode is checked inside the same Redis step; only a child's key is fetched (and its text sealed)
        accepted = rt.working.append(
            tenant=tenant, user_id=body.user_id, session_id=body.session_id, message_id=body.message_id,
            role=body.role, content=body.content, client_ts=body.client_ts, job_id=job_id,
            device_id=body.device_id, child_seal_key=lambda: rt.keys.get(tenant, body.user_id), read_back=window,
            task=lambda _: task_message("memory.extract", job_id, {"job_id": job_id}, EXTRACT_QUEUE, request_id.get()),
        )
        return MessageAccepted(
            job_id=job_id, version=accepted.version, session_id=body.session_id, message_id=body.message_id,
            duplicate=accepted.duplicate, in_window=accepted.in_window, client_ts=accepted.message.client_ts,
            window=(accepted.window or rt.working.read(tenant, body.session_id)) if window else None,
        )

    @app.get("/v1/sessions/{session_id}/messages", response_model=SessionView, tags=["working memory"])
    def get_messages(tenant: Tenant, session_id: PathId, version: int | None = None) -> SessionView:
        """The session's working memory at its head version, or at an older kept version."""
        return rt.working.read(tenant, session_id, version)

    @app.get("/v1/sessions/{session_id}/messages/{message_id}", response_model=FullMessage,
             tags=["working memory"])
    def get_message(tenant: Tenant, session_id: PathId, message_id: PathId) -> FullMessage:
        """One message with its full text (a long assistant reply is stored cut in the window)."""
        record, full = rt.working.get(tenant, session_id, message_id)
        return FullMessage(**record.model_dump(exclude={"content"}), content=full)

    @app.post("/v1/sessions/{session_id}/rollback", response_model=RolledBack, tags=["working memory"])
    def rollback(tenant: Tenant, session_id: PathId, body: RollbackIn) -> RolledBack:
        """Undo (撤回上一条: take the latest message still in the window out, each call one more; 409 once the
        window is empty) or restore a whole kept snapshot (``to_version``). Every message taken out is
        retracted: its queued work is dropped, and ``memory.retract`` (queued in the same Redis step)
        removes its episodic events and graph evidence. Its ``message_id`` is not accepted again."""
        def retraction(message_ids: list[str], user_id: str) -> tuple[str, str]:
            # on the extract queue, behind the messages' own extraction (which then finds them retracted)
            kwargs = {"tenant": tenant, "user_id": user_id, "session_id": session_id, "message_ids": message_ids}
            return task_message("memory.retract", str(uuid.uuid4()), kwargs, EXTRACT_QUEUE, request_id.get())

        return rt.working.rollback(tenant, session_id, None if body.undo_last else body.to_version, task=retraction)

    @app.post("/v1/recall", response_model=RecallResult, tags=["read"])
    def post_recall(tenant: Tenant, body: RecallIn) -> RecallResult:
        """Working memory + episodic events + graph facts for a query, each with its provenance."""
        return recall(rt, tenant, body.user_id, body.query, body.k, body.session_id, body.event_types,
                      body.include_text)

    @app.get("/v1/users/{user_id}/profile", response_model=Profile, tags=["semantic memory"])
    def profile(tenant: Tenant, user_id: PathId, include_inactive: bool = False) -> Profile:
        """What the agent believes about the user: effective (decayed) confidence, source, and why."""
        return Profile(user_id=user_id, beliefs=rt.beliefs.profile(tenant, user_id, include_inactive),
                       open_reviews=rt.beliefs.reviews.list_open(tenant, user_id))

    @app.put("/v1/users/{user_id}/beliefs", response_model=Belief, tags=["semantic memory"])
    def correct_belief(tenant: Tenant, user_id: PathId, body: BeliefIn) -> Belief:
        """Set a belief as the user states it (source human): effective at once, audited, and later
        automatic extraction does not override it. Refused (409) for a child, or a user without consent."""
        reason = rt.policies.get(tenant, user_id).why_no_beliefs()
        if reason:
            raise Conflict(f"no belief can be set for user {user_id!r}: {reason}")
        change = rt.beliefs.correct(tenant, user_id, body.relation, body.object, body.confidence, body.operator_id)
        rt.audit.write([graph_write_record(rt.user_hash_key, change, operator_id=body.operator_id)])
        return next(b for b in rt.beliefs.profile(tenant, user_id) if b.rel_id == change.rel_id)

    @app.delete("/v1/users/{user_id}/beliefs/{rel_id}", tags=["semantic memory"])
    def delete_belief(tenant: Tenant, user_id: PathId, rel_id: PathId, operator_id: OperatorId = "user") -> dict:
        """Delete a belief (source human): out of recall at once, kept with its evidence for audit."""
        change = rt.beliefs.delete(tenant, user_id, rel_id, operator_id)
        if change is None:
            raise NotFound(f"user {user_id!r} has no belief {rel_id!r}")
        rt.audit.write([graph_write_record(rt.user_hash_key, change, operator_id=operator_id)])
        return {"deleted": rel_id}

    @app.get("/v1/users/{user_id}/reviews", response_model=list[Review], tags=["semantic memory"])
    def reviews(tenant: Tenant, user_id: PathId) -> list[Review]:
        """Contradictions waiting for a human: both claims are kept until one is chosen."""
        return rt.beliefs.reviews.list_open(tenant, user_id)

    @app.post("/v1/users/{user_id}/reviews/{review_id}/resolve", response_model=list[Belief],
              tags=["semantic memory"])
    def resolve(tenant: Tenant, user_id: PathId, review_id: PathId, body: ResolveIn) -> list[Belief]:
        """Keep the claims that are true (confirmed, source human) and delete the rest."""
        changes = rt.beliefs.resolve(tenant, user_id, review_id, body.keep, body.operator_id)
        rt.audit.write([graph_write_record(rt.user_hash_key, c, operator_id=body.operator_id) for c in changes])
        return rt.beliefs.profile(tenant, user_id)

    @app.get("/v1/users/{user_id}/consent", response_model=Policy, tags=["privacy"])
    def get_consent(tenant: Tenant, user_id: PathId) -> Policy:
        return rt.policies.get(tenant, user_id)

    @app.put("/v1/users/{user_id}/consent", response_model=Policy, tags=["privacy"])
    def put_consent(tenant: Tenant, user_id: PathId, body: ConsentIn) -> Policy:
        """Opt in to (or out of) long-term memory. Until the user opts in only working memory is kept;
        opting out stops new long-term writes and hides long-term memory from recall. Audited."""
        policy = rt.policies.set_consent(tenant, user_id, body.long_term, body.operator_id)
        action = "consent.grant" if body.long_term else "consent.revoke"
        hashed = user_hash(rt.user_hash_key, tenant, user_id)
        rt.audit.write([record(rt.user_hash_key, tenant, user_id, action, f"{action}:{hashed}:{time.time()}",
                               body.operator_id, "human")])
        return policy

    @app.put("/v1/users/{user_id}/child", response_model=Policy, tags=["privacy"])
    def put_child(tenant: Tenant, user_id: PathId, body: ChildIn) -> Policy:
        """Child mode (under 13): no graph writes, episodic events without content, working memory
        encrypted at rest. Also switched on when a user declares an age under 13. Switching it on brings what
        is already held under these rules at once (``memory.childmode``): messages sealed, events made type
        only, beliefs and reviews removed."""
        policy = rt.policies.set_child(tenant, user_id, body.child, body.operator_id)
        hashed = user_hash(rt.user_hash_key, tenant, user_id)
        rt.audit.write([record(rt.user_hash_key, tenant, user_id, "child_mode.set", f"child:{hashed}:{time.time()}",
                               body.operator_id, "human", child=body.child)])
        if body.child:  # after the flag: what arrives from now on is already kept under child rules
            converted = childmode.bring_under_child_rules(rt, tenant, user_id, body.operator_id)
            log.info("child mode: converted what was held (audited as child_mode.convert): %s", converted)
        return policy

    @app.delete("/v1/users/{user_id}", response_model=Receipt, tags=["privacy"])
    def erase(tenant: Tenant, user_id: PathId, operator_id: OperatorId = "user") -> Receipt:
        """Erase the user from every layer now; queued work for them is dropped; a sweeper re-checks
        within 24 h. The receipt lists what was removed where."""
        return erase_user(rt, tenant, user_id, operator_id)

    @app.delete("/v1/users/{user_id}/events", tags=["privacy"])
    def delete_events(tenant: Tenant, user_id: PathId, event_type: EventType, operator_id: OperatorId = "user") -> dict:
        """Delete every stored event of one type (e.g. all small talk)."""
        removed = 0
        while batch := rt.episodic_store.dump(tenant, user_id, types={event_type},
                                              statuses=ALL_STATUSES, limit=1000):
            removed += rt.episodic_store.delete(tenant, user_id, [e.event_id for e, _ in batch])
        hashed = user_hash(rt.user_hash_key, tenant, user_id)
        rt.audit.write([record(rt.user_hash_key, tenant, user_id, "episodic.delete_type",
                               f"delete:{hashed}:{event_type.value}:{time.time()}",
                               operator_id, "human", event_type=event_type.value, removed=removed)])
        return {"deleted": removed, "event_type": event_type.value}

    @app.post("/v1/feedback", response_model=FeedbackResult, tags=["feedback"])
    def post_feedback(tenant: Tenant, body: FeedbackIn) -> FeedbackResult:
        """Was a recalled event or belief useful? Moves its retrieval weight; feeds the interference rate."""
        result, change = feedback.give(rt, tenant, body)
        if change is not None:
            rt.audit.write([graph_write_record(rt.user_hash_key, change, operator_id=body.operator_id)])
        return result

    @app.get("/v1/metrics/product", response_model=Metrics, tags=["ops"])
    def product_metrics(tenant: Tenant) -> Metrics:
        """Session depth, cross-session retention, task success rate, memory interference rate."""
        return feedback.metrics(rt, tenant)

    @app.get("/v1/jobs/{job_id}", response_model=JobStatus, tags=["write"])
    def get_job(tenant: Tenant, job_id: PathId) -> JobStatus:
        status = rt.jobs.get(job_id)
        if status.tenant != tenant:  # job ids are global: another tenant's answers 404, and is audited
            owner = user_hash(rt.user_hash_key, status.tenant, "-")
            rt.audit.write([record(rt.user_hash_key, tenant, "-", "access.denied",
                                   f"denied:{tenant}:{job_id}:{time.time()}", tenant, "api", resource="job",
                                   owner_tenant_hash=owner)])
            raise NotFound(f"no job {job_id!r} (unknown, or older than the job TTL)")
        return status

    @app.get("/healthz", response_model=Health, tags=["ops"])
    def healthz() -> JSONResponse:
        """``ok`` (200) when every backend answers and the query embedder has encoded; ``loading`` (503)
        while it is still loading, so a load balancer sends no recall to a process that cannot answer yet;
        ``degraded`` (503) when a backend is unreachable or a pipeline stage is stalled (``stage:<queue>``:
        its queue holds work and none of it finished for ``stage_stall_after_s``)."""
        backends = rt.health() | {f"stage:{q}": why for q, why in stages.stalled(
            rt.redis, QUEUES, started, rt.settings.stage_stall_after_s).items()}
        down = any(v.startswith(("unreachable", "stalled")) for v in backends.values())
        status = "degraded" if down else "loading" if backends["embedder"] == "loading" else "ok"
        return JSONResponse(status_code=200 if status == "ok" else 503,
                            content=Health(status=status, backends=backends).model_dump())

    return app
