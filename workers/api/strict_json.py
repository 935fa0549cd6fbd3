"""Request bodies as strict JSON (RFC 8259), and validation errors as the API answers them.

Python's ``json`` reads NaN, Infinity, numbers that overflow to infinity (1e400) and lone UTF-16
surrogates; none can be stored, rendered or logged safely, so a body holding one is refused with a 422
that says what to send instead — and no error ever repeats the input (it may be the user's text).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, NoReturn

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from memory.models import ID_PATTERN, ID_RULE


class _NotJson(ValueError):
    """Something Python's json reads but JSON (RFC 8259) has not, and nothing after it could store or render."""


def _no_constant(name: str) -> NoReturn:
    raise _NotJson(f"{name} is not a JSON number: send a finite number")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise _NotJson("a number is beyond a 64-bit float (about ±1.8e308): send a finite number")
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads decodes a pair to its character: these are alone


def strict_json(body: bytes) -> Any:
    """A request body as JSON, refusing NaN, Infinity, a number that overflows to infinity (1e400) and a lone
    UTF-16 surrogate ("\\ud800" without its pair: no character, it breaks every encoder after it). A refusal
    is a ``JSONDecodeError``, which FastAPI answers as an invalid body (422)."""
    try:
        value = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
        todo = [value]
        while todo:  # a loop, not recursion: json.loads allows deeper nesting than a recursive walk would
            item = todo.pop()
            if isinstance(item, str) and _LONE_SURROGATE.search(item):
                raise _NotJson("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff without its pair): "
                               "send Unicode text")
            if isinstance(item, dict):
                todo.extend(item)
                todo.extend(item.values())
            elif isinstance(item, list):
                todo.extend(item)
        return value
    except _NotJson as exc:
        raise json.JSONDecodeError(str(exc), "", 0) from None


class _StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_json(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose body is read with :func:`strict_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict


def problem(error: Mapping[str, Any]) -> dict[str, Any]:
    """One validation error as the API answers it: where, what to fix, its type. Never the input: it may be
    the user's text (and a NaN or a lone surrogate in it would not even render)."""
    ctx = error.get("ctx") or {}
    field = ".".join(str(p) for p in error["loc"] if p != "body") or "body"
    if error["type"] == "json_invalid":  # its loc is ("body", character offset)
        field, msg = "body", f"not valid JSON: {ctx.get('error')}"
    elif error["type"] == "string_pattern_mismatch" and ctx.get("pattern") == ID_PATTERN:
        msg = f"must be an id: {ID_RULE}"
    else:
        msg = error["msg"].removeprefix("Value error, ")
    return {"loc": list(error["loc"]), "field": field, "msg": msg, "type": error["type"]}
