"""The HTTP enqueue API. Writes go to working memory and the queue; reads never touch the queue.

Run: ``uvicorn workers.api:create_app --factory``. OpenAPI at ``/docs``.
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from memory import ids
from memory.errors import InvalidInput, MnemeError
from memory.jobs import JobStatus
from memory.recall import RecallResult, recall
from memory.runtime import Runtime, get_runtime
from memory.working import RolledBack, SessionView
from workers.celery_app import create_celery
from workers.schemas import ErrorBody, FullMessage, Health, MessageAccepted, MessageIn, RecallIn, RollbackIn

log = logging.getLogger("mneme.api")
ERRORS = {400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody},
          422: {"model": ErrorBody}, 503: {"model": ErrorBody}}


def create_app(runtime: Runtime | None = None) -> FastAPI:
    rt = runtime or get_runtime()
    celery = create_celery(rt.settings)
    tenant = rt.settings.tenant

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # load the query embedder in the background: /healthz says "loading" until it is ready
        threading.Thread(target=lambda: rt.embedder, name="embedder-preload", daemon=True).start()
        yield

    app = FastAPI(title="Mneme", version="0.1.0", lifespan=lifespan, responses=ERRORS,
                  description="Memory backend for AI agents: working, episodic and semantic memory.")

    @app.exception_handler(MnemeError)
    async def mneme_error(request: Request, exc: MnemeError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"error": exc.code, "message": exc.message})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
                    for e in exc.errors()]
        return JSONResponse(status_code=422, content={
            "error": "invalid_request", "message": "; ".join(problems),
            "details": jsonable_encoder(exc.errors(), custom_encoder={Exception: str}),
        })

    @app.post("/v1/messages", status_code=202, response_model=MessageAccepted, tags=["write"])
    def post_message(body: MessageIn) -> MessageAccepted:
        """Append a message to the session's working memory and queue it for long-term memory."""
        limit = rt.settings.content_max_chars
        if len(body.content) > limit:
            raise InvalidInput(f"content has {len(body.content)} characters; the limit is {limit}: split it")
        if not body.content.strip():
            raise InvalidInput("content is empty after cleaning: send some text")
        job_id = ids.job_id(tenant, body.session_id, body.message_id)
        accepted = rt.working.append(
            tenant=tenant, user_id=body.user_id, session_id=body.session_id, message_id=body.message_id,
            role=body.role, content=body.content, client_ts=body.client_ts, job_id=job_id,
            device_id=body.device_id,
        )
        if not accepted.duplicate:
            try:
                celery.send_task("memory.extract", task_id=job_id, kwargs={
                    "job_id": job_id, "message": accepted.message.model_dump(mode="json")})
            except Exception:  # noqa: BLE001 - the job is recorded as pending; redrive will send it
                log.exception("could not queue job %s; the redrive task will", job_id)
        return MessageAccepted(
            job_id=job_id, version=accepted.version, session_id=body.session_id, message_id=body.message_id,
            duplicate=accepted.duplicate, in_window=accepted.in_window, client_ts=accepted.message.client_ts,
        )

    @app.get("/v1/sessions/{session_id}/messages", response_model=SessionView, tags=["working memory"])
    def get_messages(session_id: str, version: int | None = None) -> SessionView:
        """The session's working memory at its head version, or at an older kept version."""
        return rt.working.read(tenant, session_id, version)

    @app.get("/v1/sessions/{session_id}/messages/{message_id}", response_model=FullMessage,
             tags=["working memory"])
    def get_message(session_id: str, message_id: str) -> FullMessage:
        """One message with its full text (a long assistant reply is stored cut in the window)."""
        record, full = rt.working.get(tenant, session_id, message_id)
        return FullMessage(**record.model_dump(exclude={"content"}), content=full)

    @app.post("/v1/sessions/{session_id}/rollback", response_model=RolledBack, tags=["working memory"])
    def rollback(session_id: str, body: RollbackIn) -> RolledBack:
        """Restore a whole earlier snapshot (``to_version``) or undo the last change (撤回上一条)."""
        return rt.working.rollback(tenant, session_id, None if body.undo_last else body.to_version)

    @app.post("/v1/recall", response_model=RecallResult, tags=["read"])
    def post_recall(body: RecallIn) -> RecallResult:
        """Working memory + episodic events + graph facts for a query, each with its provenance."""
        return recall(rt, tenant, body.user_id, body.query, body.k, body.session_id, body.event_types,
                      body.include_text)

    @app.get("/v1/jobs/{job_id}", response_model=JobStatus, tags=["write"])
    def get_job(job_id: str) -> JobStatus:
        return rt.jobs.get(job_id)

    @app.get("/healthz", response_model=Health, tags=["ops"])
    def healthz() -> JSONResponse:
        backends = rt.health()
        down = any(v.startswith("unreachable") for v in backends.values())
        body = Health(status="degraded" if down else "ok", backends=backends)
        return JSONResponse(status_code=503 if down else 200, content=body.model_dump())

    return app
