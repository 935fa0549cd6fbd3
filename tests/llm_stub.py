"""STUB of an OpenAI-compatible LLM endpoint, for tests only. No language model runs here (none can on the
test machines): it answers ``POST /v1/chat/completions`` with whatever the test told it to answer.

    with StubLLM() as stub:
        stub.reply_json({"events": [...], "facts": [...]})    # the assistant message content, as JSON
        settings = Settings(llm_base_url=stub.base_url, ...)
        ...
        stub.requests                                        # every request body received, in order

Other behaviours: ``reply_text(raw)`` (any content string), ``fail(500)`` (an HTTP error; ``fail(429,
retry_after=7)`` with a ``Retry-After`` header),
``hang(seconds)`` (answer only after a delay, to trip the client's timeout), ``usage=None`` (omit the
``usage`` block). Stdlib ``http.server`` in a background thread on 127.0.0.1, on a free port.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_USAGE = {"prompt_tokens": 300, "completion_tokens": 60, "total_tokens": 360}


class StubLLM:
    """A stand-in LLM endpoint whose answer each test sets. Use as a context manager."""

    def __init__(self) -> None:
        self.content = '{"events": [{"event_type": "statement", "keywords": [], "summary": "stub"}], "facts": []}'
        self.status = 200
        self.retry_after: float | None = None
        self.delay_s = 0.0
        self.usage: dict[str, Any] | None = dict(DEFAULT_USAGE)
        self.requests: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="llm-stub", daemon=True)

    # --- behaviour -----------------------------------------------------------------------------
    def reply_json(self, obj: Any, usage: dict[str, Any] | None = DEFAULT_USAGE) -> None:
        self.reply_text(json.dumps(obj, ensure_ascii=False), usage)

    def reply_text(self, text: str, usage: dict[str, Any] | None = DEFAULT_USAGE) -> None:
        self.content, self.status, self.delay_s = text, 200, 0.0
        self.usage = dict(usage) if usage is not None else None

    def fail(self, status: int = 500, retry_after: float | None = None) -> None:
        self.status, self.delay_s, self.retry_after = status, 0.0, retry_after

    def hang(self, seconds: float) -> None:
        """Answer normally, but only after ``seconds`` (cut short when the stub stops)."""
        self.delay_s = seconds

    # --- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers still sleeping in hang()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if stub.delay_s and stub._stopping.wait(stub.delay_s):
                    return
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if stub.status != 200:
                    return self._send(stub.status, {"error": {"message": "stub failure", "type": "server_error"}},
                                      {"retry-after": str(stub.retry_after)} if stub.retry_after else {})
                answer: dict[str, Any] = {
                    "id": f"chatcmpl-stub-{len(stub.requests)}",
                    "object": "chat.completion",
                    "model": body.get("model", "stub") if isinstance(body, dict) else "stub",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": stub.content}}],
                }
                if stub.usage is not None:
                    answer["usage"] = stub.usage
                self._send(200, answer)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout): nothing to answer
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
                pass

        return Handler
