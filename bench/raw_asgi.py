"""The API bench's raw baseline: the smallest ASGI app that reads a POST body and answers 202 with a short JSON
body, served by the same uvicorn as Mneme's API and loaded by the same generator in the same run — what this
box's HTTP stack and load generator cost before Mneme does anything."""

from __future__ import annotations

from typing import Any

ANSWER = b'{"accepted":true}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 202, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})
