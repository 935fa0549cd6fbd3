"""The HTTP side of the structured logs (:mod:`memory.logs`): :class:`RequestIdMiddleware` gives each request
an id and binds it to ``memory.logs.request_id``, so every line logged while serving it carries that id, and
``tasks.signals`` copies it into the tasks the request sends.
"""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory.logs import request_id

REQUEST_ID_HEADER = "X-Request-ID"
#: a client's request id is kept if it looks like an id; anything else is replaced by a fresh uuid4
_VALID_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


class RequestIdMiddleware:
    """Gives each HTTP request an id (the client's ``X-Request-ID`` if it sent a sane one, else a uuid4),
    binds it to the ``request_id`` context variable for the request, and echoes it in the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), "")
        rid = sent if _VALID_ID.fullmatch(sent) else str(uuid.uuid4())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            await send(message)

        token = request_id.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)
