"""The HTTP enqueue API. Writes go to working memory and the queue; reads never touch the queue.

Run: ``uvicorn workers.api:create_app --factory``. OpenAPI at ``/docs``.

One router per resource, each handler a call into the library with the dependencies of :mod:`.deps`
(the runtime, the caller's tenant, id types): :mod:`.messages` (working memory), :mod:`.recall`,
:mod:`.beliefs` (semantic memory), :mod:`.users` (privacy), :mod:`.history` (a user's sessions and events,
listed), :mod:`.feedback`, :mod:`.jobs`, :mod:`.health`; :mod:`.docs` serves ``/docs`` offline,
:mod:`.memory_page` the memory page (``/memory``).
Bodies in: :mod:`.requests`; bodies out: :mod:`mneme_client.models`; errors: :mod:`.errors`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memory.mneme import Mneme, get_mneme
from tasks.envelope import AUDIT_BATCH
from workers.api import beliefs, docs, errors, feedback, health, history, jobs, memory_page, messages, recall, users
from workers.api.deps import KEYED
from workers.api.observability import install
from workers.api.sends import Extractions, audit_sends
from workers.api.strict_json import StrictJsonRoute
from workers.celery_app import ROUTES

#: in this order, the OpenAPI document lists the paths as it always has
ROUTERS = tuple(m.router for m in (messages, recall, beliefs, users, history, feedback, jobs, health))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # load the query embedder (and encode once) in the background: /healthz says "loading" until then
    threading.Thread(target=app.state.mneme.warm_up, name="warm-up", daemon=True).start()
    yield
    app.state.extractions.close()  # what was accepted goes to extraction before the process ends
    app.state.audits.close()  # and what was read to the audit trail


def create_app(runtime: Mneme | None = None) -> FastAPI:
    mneme = runtime or get_mneme()
    app = FastAPI(title="Mneme", version="0.1.0", lifespan=lifespan, responses=errors.RESPONSES,
                  exception_handlers=errors.HANDLERS, docs_url=None, redoc_url=None,  # /docs: offline (.docs)
                  description="Memory backend for AI agents: working, episodic and semantic memory.")
    app.router.route_class = StrictJsonRoute  # /metrics too; each router sets its own (deps.resource_router)
    app.state.mneme = mneme
    settings = mneme.settings
    app.state.extractions = Extractions(mneme.state.fair, mneme.state.dispatch, ROUTES["memory.extract"],
                                        settings.extract_send_interval_s, settings.extract_batch_size,
                                        settings.tenant_queue_limit)
    app.state.audits = audit_sends(mneme.state.dispatch, ROUTES["memory.audit"], settings.extract_send_interval_s,
                                   AUDIT_BATCH)
    install(app, mneme.state.broker, dependencies=KEYED)  # JSON logs, request ids and latency, GET /metrics
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(docs.router)
    app.include_router(memory_page.router)
    return app
