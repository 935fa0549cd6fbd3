"""Observability for the HTTP API: request ids, JSON logs, request latency and ``GET /metrics``.

``install(app)`` in ``workers.api.create_app`` is all the API needs. Metrics of every process (API,
workers) are served here; see :mod:`memory.telemetry` for the multi-process design.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from fastapi import FastAPI, params
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import tasks.signals  # noqa: F401 - copies the request id into the tasks a request sends
from memory import telemetry
from memory.logs import configure_logging
from memory.state.broker import Broker
from workers.celery_app import QUEUES
from workers.logs import RequestIdMiddleware

log = logging.getLogger("mneme.http")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
QUIET_ROUTES = frozenset({"/metrics", "/healthz"})  # polled: their access lines are DEBUG


class LatencyMiddleware:
    """Observes ``mneme_http_request_seconds{method, route, status}`` and writes one access line per request.

    ``route`` is the matched route's template (``/v1/sessions/{session_id}/messages``), ``unmatched`` for a
    404 outside every route: bounded label values, and no user id in metrics or logs. An exception that
    escapes the app counts as a 500 (that is what the server answers)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = time.perf_counter() - started
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            route = getattr(scope.get("route"), "path", None) or "unmatched"  # set by the router on a match
            telemetry.HTTP_SECONDS.labels(method, route, str(status)).observe(elapsed)
            log.log(logging.DEBUG if route in QUIET_ROUTES else logging.INFO, "%s %s %s %.1f ms",
                    method, route, status, elapsed * 1000,
                    extra={"method": method, "route": route, "status": status,
                           "duration_ms": round(elapsed * 1000, 2)})


def install(app: FastAPI, broker: Broker | None = None, queues: Sequence[str] = QUEUES,
            service: str | None = "api", dependencies: Sequence[params.Depends] = ()) -> None:
    """Add request ids, request latency and ``GET /metrics`` to ``app``; with ``service`` (default "api")
    also switch this process's logs to JSON lines. Call it before the app serves its first request.

    ``broker`` is where queue depths are read; by default the process runtime's, looked up at the first
    scrape. ``dependencies`` run before each scrape: the API's asks for a key when auth is on."""
    if service:
        configure_logging(service)
    found: list[Broker] = [broker] if broker is not None else []

    def the_broker() -> Broker:
        if not found:
            from memory.mneme import get_mneme

            found.append(get_mneme().state.broker)
        return found[0]

    app.add_middleware(LatencyMiddleware)
    app.add_middleware(RequestIdMiddleware)  # added last: outermost, so the access line has the id
    app.add_api_route("/metrics", _metrics_endpoint(the_broker, tuple(queues)), methods=["GET"],
                      include_in_schema=False, dependencies=dependencies)


def _metrics_endpoint(broker: Callable[[], Broker], queues: tuple[str, ...]) -> Callable[[], Response]:
    def metrics() -> Response:
        """Prometheus text format: every process's metrics plus live queue depths."""
        body, content_type = telemetry.render_metrics(broker(), queues)
        return Response(content=body, headers={"content-type": content_type})

    return metrics
