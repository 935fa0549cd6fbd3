"""Audit sink on Elasticsearch (official client): ``elasticsearch://host:9200/prefix`` or ``elasticsearchs://…``
(https). Options: ``?max_retries=3&timeout=10`` (retries per request, request timeout in seconds). The API key,
if the cluster wants one, is ``MNEME_ELASTICSEARCH_API_KEY``; ``user:password@host`` in the URL is basic auth.

Layout: one index per UTC day of the record's ``ts``, ``<prefix>-YYYY.MM.DD``, shaped by a composable index
template for ``<prefix>-*`` (named ``<prefix>``; installed on first use when missing or older than
``TEMPLATE_VERSION``): keyword ids, tenant, user, operator_id, source and action; ``ts`` a date in epoch
seconds; float confidences; ``dynamic: false``, so a field added to records later is kept in ``_source``
but not indexed (never rejected).

Idempotence: records go through ``_bulk`` as ``create`` with ``_id`` = the record's ``id``. A re-sent record
lands in the same index (the day comes from its own ``ts``) and gets 409, which counts as stored. (Not
checked: that the stored copy has the same content — ids are deterministic per event.)

Retries: the client retries a request on connection errors, timeouts and 429/502/503/504, with jittered
exponential backoff. Items the bulk answer rejects with such a status are re-sent (only those) a few times.
What still fails becomes ``TransientError`` (the Celery task retries it later; creates make that safe);
a refused key, a mapping rejection, a server that is not Elasticsearch become ``ConfigurationError``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    Elasticsearch,
    SSLError,
    TransportError,
    UnsupportedProductError,
)

from memory.errors import ConfigurationError, InvalidInput, TransientError
from memory.settings import Settings

DEFAULT_PREFIX = "mneme-audit"
TEMPLATE_VERSION = 1
RETRY_ON_STATUS = (429, 502, 503, 504)
CHUNK = 500  # records per _bulk request
PREFIX = re.compile(r"[a-z0-9][a-z0-9._-]{0,200}")  # index-name rules, minus the date suffix

_KEYWORD = {"type": "keyword"}
MAPPINGS: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        **{name: _KEYWORD for name in ("id", "tenant", "user", "operator_id", "source", "action",
                                       "relation", "rel_id", "evidence_id", "event_id", "event_type")},
        "ts": {"type": "date", "format": "epoch_second"},
        "confidence_before": {"type": "float"},
        "confidence_after": {"type": "float"},
    },
}

T = TypeVar("T")
_Action = tuple[dict[str, Any], dict[str, Any]]  # a _bulk ``create`` line and the record it stores


class ElasticsearchAuditSink:
    def __init__(self, client: Elasticsearch, prefix: str = DEFAULT_PREFIX, *, item_retries: int = 3,
                 item_backoff_s: float = 0.2) -> None:
        if not PREFIX.fullmatch(prefix):
            raise ConfigurationError(f"bad Elasticsearch index prefix {prefix!r}: use lowercase [a-z0-9._-]")
        self.client = client
        self.prefix = prefix
        self._item_retries = item_retries
        self._item_backoff_s = item_backoff_s
        self.where = ", ".join(node.base_url for node in client.transport.node_pool.all())
        self._template_ready = False
        self._template_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> ElasticsearchAuditSink:
        parts = urlsplit(url)
        if parts.scheme not in ("elasticsearch", "elasticsearchs") or not parts.hostname:
            raise ConfigurationError(f"expected elasticsearch://host:9200/prefix or elasticsearchs://…, got {url!r}")
        try:
            port = parts.port or 9200
            options = {k: v[-1] for k, v in parse_qs(parts.query, strict_parsing=bool(parts.query)).items()}
            max_retries = int(options.pop("max_retries", 3))
            timeout = float(options.pop("timeout", 10))
        except ValueError as exc:
            raise ConfigurationError(f"bad Elasticsearch URL {url!r}: {exc}") from exc
        if options:
            raise ConfigurationError(f"unknown Elasticsearch URL options {sorted(options)}: use max_retries, timeout")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        auth: dict[str, Any] = {}
        if settings.elasticsearch_api_key:
            auth["api_key"] = settings.elasticsearch_api_key
        elif parts.username:
            auth["basic_auth"] = (unquote(parts.username), unquote(parts.password or ""))
        client = Elasticsearch(
            f"{'https' if parts.scheme == 'elasticsearchs' else 'http'}://{host}:{port}",
            request_timeout=timeout, max_retries=max_retries, retry_on_timeout=True,
            retry_on_status=RETRY_ON_STATUS, retry_backoff_base=0.2, retry_backoff_cap=5.0, **auth,
        )
        return cls(client, parts.path.strip("/") or DEFAULT_PREFIX)

    @property
    def template_name(self) -> str:
        return self.prefix

    def index_for(self, record: Mapping[str, Any]) -> str:
        """The daily index of the record's own ``ts`` (UTC), so a re-send on another day finds it."""
        try:
            day = datetime.fromtimestamp(record["ts"], UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInput(f"audit record {record['id']!r} has an impossible ts {record['ts']!r}") from exc
        return f"{self.prefix}-{day:%Y.%m.%d}"

    def ping(self) -> None:
        """One ``GET /`` without retries: a health check reports the state now."""
        self._call("ping", self.client.options(max_retries=0).info)

    def close(self) -> None:
        self.client.close()

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        if not records:
            return
        actions = [self._action(r) for r in records]
        self._ensure_template()
        for start in range(0, len(actions), CHUNK):
            self._send(actions[start:start + CHUNK])

    # --- internals -----------------------------------------------------------------------------

    def _action(self, record: dict[str, Any]) -> _Action:
        if not isinstance(record.get("id"), str) or not record["id"]:
            raise InvalidInput(f"audit record without an id: {sorted(record)}")
        if not isinstance(record.get("ts"), int | float) or isinstance(record["ts"], bool):
            raise InvalidInput(f"audit record {record['id']!r} has no numeric ts")
        return {"create": {"_index": self.index_for(record), "_id": record["id"]}}, record

    def _send(self, actions: list[_Action]) -> None:
        """One chunk through ``_bulk``; items rejected with a retryable status are re-sent, alone. Items
        refused for good are reported after the others are through."""
        refused: list[tuple[_Action, int, object]] = []
        for attempt in range(self._item_retries + 1):
            if attempt:
                time.sleep(self._item_backoff_s * 2 ** (attempt - 1))
            operations = [part for action in actions for part in action]
            answer = self._call("bulk write", partial(self.client.bulk, operations=operations,
                                                      include_source_on_error=False))
            retry: list[tuple[_Action, int, object]] = []
            for action, item in zip(actions, answer["items"], strict=True):
                result = next(iter(item.values()))
                status = int(result.get("status", 500))
                if 200 <= status < 300 or status == 409:  # 409: this id is stored already (a re-send)
                    continue
                (retry if _transient(status) else refused).append((action, status, result.get("error")))
            if not retry:
                break
            actions = [action for action, _, _ in retry]
        else:
            _, status, error = retry[0]
            raise TransientError(f"Elasticsearch at {self.where} did not take {len(retry)} audit records after "
                                 f"{self._item_retries} retries: {status} {_describe(error)}")
        if refused:
            (_, body), status, error = refused[0]
            raise ConfigurationError(f"Elasticsearch at {self.where} refused {len(refused)} audit records, e.g. "
                                     f"{body['id']!r} with {status}: {_describe(error)}")

    def _ensure_template(self) -> None:
        if self._template_ready:
            return
        with self._template_lock:
            if self._template_ready:
                return
            found = self._call("template lookup", lambda: self.client.options(ignore_status=404)
                               .indices.get_index_template(name=self.template_name))
            current = [t for t in found.body.get("index_templates", []) if t.get("name") == self.template_name]
            meta = current[0]["index_template"].get("_meta", {}) if current else {}
            if meta.get("version", 0) < TEMPLATE_VERSION:
                self._call("template install", lambda: self.client.indices.put_index_template(
                    name=self.template_name, index_patterns=[f"{self.prefix}-*"], priority=200,
                    template={"settings": {"number_of_shards": 1}, "mappings": MAPPINGS},
                    meta={"managed_by": "mneme", "version": TEMPLATE_VERSION}))
            self._template_ready = True

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with _translated(what, self.where):
            return fn()


def _transient(status: int) -> bool:
    return status in RETRY_ON_STATUS or status == 408 or status >= 500


def _describe(error: object) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('reason', '')}"
    return str(error)


@contextmanager
def _translated(what: str, where: str) -> Iterator[None]:
    """Client errors become Mneme's: unreachable, timed out or busy → TransientError (tasks retry it);
    a server that is not Elasticsearch, refused credentials, a bad request → ConfigurationError."""
    try:
        yield
    except UnsupportedProductError as exc:
        raise ConfigurationError(f"{where} is not Elasticsearch ({what}): {exc}") from exc
    except (AuthenticationException, AuthorizationException) as exc:
        raise ConfigurationError(
            f"Elasticsearch at {where} refused the {what}: check MNEME_ELASTICSEARCH_API_KEY: {exc}") from exc
    except ApiError as exc:
        if _transient(exc.status_code):
            raise TransientError(f"Elasticsearch at {where} is busy or unavailable ({what}): {exc}") from exc
        raise ConfigurationError(f"Elasticsearch at {where} rejected the {what}: {exc}") from exc
    except SSLError as exc:
        raise ConfigurationError(f"TLS to Elasticsearch at {where} failed ({what}): {exc}") from exc
    except TransportError as exc:  # connection refused / reset, timeout, after the client's retries
        raise TransientError(f"Elasticsearch at {where} unreachable ({what}): {exc}") from exc
