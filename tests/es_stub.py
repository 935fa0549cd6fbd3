"""STUB of an Elasticsearch node, for tests only. No Elasticsearch can run on the test machines (it needs a
JVM and a download), so this small HTTP server answers the few endpoints the audit sink uses, the way
Elasticsearch 9 answers them — it is not Elasticsearch, and a green test here does not prove that a real
cluster accepts the same requests (see docker-compose ``elasticsearch`` for that).

    with StubElasticsearch() as es:
        sink = ElasticsearchAuditSink.from_url(f"elasticsearch://127.0.0.1:{es.port}/audit", settings)
        ...
        es.templates["audit"]           # the body of PUT /_index_template/audit
        es.indices["audit-2026.01.02"]  # {_id: document} of what _bulk stored
        es.requests                     # {method, path, headers} of every request (record=False: none)

Endpoints: ``GET``/``HEAD /`` (a node info body), ``PUT``/``GET``/``HEAD /_index_template/<name>``,
``POST``/``PUT /_bulk`` (NDJSON; ``create`` of an existing ``_id`` → 409, ``index`` overwrites). Every
response carries ``X-Elastic-Product: Elasticsearch``, which the official client insists on;
``product_header=False`` leaves it out. ``fail_next(n, status)`` answers the next ``n`` requests with
``status`` (429 → ``es_rejected_execution_exception``, 503 → ``unavailable_shards_exception``);
``reject_items(n, status)`` makes the next ``n`` bulk items fail with ``status`` inside a 200 answer. Bulk
documents are checked against the mapping of the template whose pattern matches their index (keyword →
string, float → number, epoch date → number), a 400 ``document_parsing_exception`` otherwise.
Stdlib ``http.server`` in a background thread on 127.0.0.1, on a free port.
"""

from __future__ import annotations

import fnmatch
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

INFO = {
    "name": "es-stub-node-1",
    "cluster_name": "docker-cluster",
    "cluster_uuid": "Zq3Hf0wvS3-stub-cluster",
    "version": {
        "number": "9.5.2",
        "build_flavor": "default",
        "build_type": "docker",
        "build_hash": "0000000000000000000000000000000000000000",
        "build_date": "2026-01-01T00:00:00.000000000Z",
        "build_snapshot": False,
        "lucene_version": "10.3.1",
        "minimum_wire_compatibility_version": "8.19.0",
        "minimum_index_compatibility_version": "8.0.0",
    },
    "tagline": "You Know, for Search",
}
ERRORS = {
    400: "document_parsing_exception",
    404: "resource_not_found_exception",
    409: "version_conflict_engine_exception",
    429: "es_rejected_execution_exception",
    500: "internal_server_error",
    502: "bad_gateway",
    503: "unavailable_shards_exception",
    504: "timeout_exception",
}


def error_body(status: int, reason: str) -> dict[str, Any]:
    cause = {"type": ERRORS.get(status, "exception"), "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


class StubElasticsearch:
    """A stand-in Elasticsearch node; each test sets its misbehaviour. Use as a context manager."""

    def __init__(self, product_header: bool = True, record: bool = True) -> None:
        self.product_header = product_header
        self.record = record
        self.templates: dict[str, dict[str, Any]] = {}
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        self._fail: list[int] = []  # statuses for the next requests
        self._reject: list[int] = []  # statuses for the next bulk items
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="es-stub",
                                        daemon=True)

    # --- behaviour -----------------------------------------------------------------------------
    def fail_next(self, n: int, status: int = 429) -> None:
        with self._lock:
            self._fail = [status] * n

    def reject_items(self, n: int, status: int = 429) -> None:
        with self._lock:
            self._reject = [status] * n

    def docs(self) -> dict[str, dict[str, Any]]:
        """Every stored document by ``_id``, across indices."""
        return {i: d for docs in self.indices.values() for i, d in docs.items()}

    def count(self, method: str, path: str) -> int:
        return sum(1 for r in self.requests if r["method"] == method and r["path"] == path)

    # --- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> StubElasticsearch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> StubElasticsearch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the endpoints ---------------------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        with self._lock:
            if self.record:
                self.requests.append({"method": method, "path": path, "headers": headers})
            if self._fail:
                status = self._fail.pop(0)
                return status, error_body(status, "stub: told to fail this request")
            parts = [p for p in path.split("/") if p]
            if not parts:
                return 200, INFO
            if parts[0] == "_index_template" and len(parts) == 2:
                return self._template(method, parts[1], body)
            if parts[-1] == "_bulk" and method in ("POST", "PUT"):
                return 200, self._bulk(parts[0] if len(parts) == 2 else None, body)
            return 404, error_body(404, f"stub: no route {method} {path}")

    def _template(self, method: str, name: str, body: bytes) -> tuple[int, Any]:
        if method == "PUT":
            spec = json.loads(body)
            if not spec.get("index_patterns"):
                return 400, error_body(400, "index_patterns is missing")
            self.templates[name] = spec
            return 200, {"acknowledged": True}
        if name not in self.templates:
            return 404, error_body(404, f"index template matching [{name}] not found")
        return 200, {"index_templates": [{"name": name, "index_template": self.templates[name]}]}

    def _bulk(self, default_index: str | None, body: bytes) -> dict[str, Any]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        items, i = [], 0
        while i < len(lines):
            [(op, meta)] = lines[i].items()
            doc = lines[i + 1] if op != "delete" else None
            i += 1 if op == "delete" else 2
            index, doc_id = meta.get("_index", default_index), meta.get("_id")
            result: dict[str, Any] = {"_index": index, "_id": doc_id}
            if self._reject:
                status = self._reject.pop(0)
                items.append({op: {**result, "status": status, **error_body(status, "stub: item rejected")}})
                continue
            problem = self._mapping_problem(index, doc) if doc is not None else None
            stored = self.indices.setdefault(index, {})
            if problem:
                result |= {"status": 400, **error_body(400, problem)}
            elif op == "create" and doc_id in stored:
                result |= {"status": 409, **error_body(
                    409, f"[{doc_id}]: version conflict, document already exists (current version [1])")}
            elif op in ("create", "index"):
                created = doc_id not in stored
                stored[doc_id] = doc
                result |= {"_version": 1, "result": "created" if created else "updated",
                           "status": 201 if created else 200, "_seq_no": len(stored) - 1, "_primary_term": 1,
                           "_shards": {"total": 2, "successful": 1, "failed": 0}}
            else:
                result |= {"status": 400, **error_body(400, f"stub: bulk op {op} not supported")}
            items.append({op: result})
        return {"errors": any(next(iter(it.values()))["status"] >= 300 for it in items), "took": 1,
                "items": items}

    def _mapping_problem(self, index: str, doc: dict[str, Any]) -> str | None:
        for spec in self.templates.values():
            if any(fnmatch.fnmatchcase(index, p) for p in spec["index_patterns"]):
                fields = spec.get("template", {}).get("mappings", {}).get("properties", {})
                for name, value in doc.items():
                    kind = fields.get(name, {}).get("type")
                    if value is None or kind is None:
                        continue
                    number = isinstance(value, int | float) and not isinstance(value, bool)
                    if (kind == "keyword" and not isinstance(value, str)) or (kind in ("float", "date")
                                                                               and not number):
                        return f"[{name}] failed to parse field of type [{kind}]: {value!r}"
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, payload = stub._route(self.command, urlsplit(self.path).path,
                                              {k.lower(): v for k, v in self.headers.items()}, body)
                data = b"" if self.command == "HEAD" else json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    if stub.product_header:
                        self.send_header("X-Elastic-Product", "Elasticsearch")
                    self.send_header("content-type", "application/vnd.elasticsearch+json;compatible-with=9")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve  # noqa: N815 (http.server's naming)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
                pass

        return Handler
