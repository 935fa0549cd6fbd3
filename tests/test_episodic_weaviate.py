"""The episodic contract against a real Weaviate (``MNEME_TEST_WEAVIATE_URL``, e.g. the docker-compose
service), plus what can be checked here without a server: URLs, names, ids, and failing fast."""

from __future__ import annotations

import os
import time
import uuid

import grpc
import httpx
import pytest
from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateConnectionError, WeaviateQueryError
from weaviate.util import generate_uuid5

from memory.episodic import StoredEvent
from memory.episodic.weaviate import (
    DEFAULT_COLLECTION,
    TENANT_NAME,
    Target,
    WeaviateEpisodicStore,
    _boundary,
    _event,
    _properties,
    object_id,
    parse_url,
    tenant_name,
)
from memory.errors import ConfigurationError, TransientError
from memory.models import EventType, Role
from memory.registry import open_backend
from memory.settings import Settings
from tests.episodic_contract import EpisodicContract
from workers.local.stack import free_port

URL = os.environ.get("MNEME_TEST_WEAVIATE_URL", "")


@pytest.fixture(scope="module")
def weaviate_store():
    if not URL:
        pytest.skip("MNEME_TEST_WEAVIATE_URL not set: no Weaviate server can run here; see README")
    collection = f"MnemeTest{uuid.uuid4().hex[:10]}"  # one throwaway collection per run, dropped after
    sep = "&" if "?" in URL else "?"
    store = WeaviateEpisodicStore.from_url(f"{URL}{sep}collection={collection}", Settings())
    yield store
    store.client.collections.delete(collection)
    store.close()


class TestWeaviateEpisodic(EpisodicContract):
    @pytest.fixture
    def store(self, weaviate_store):
        return weaviate_store


# --- no server needed ---------------------------------------------------------------------------


def test_urls_name_hosts_ports_tls_and_the_collection():
    assert parse_url("weaviate://localhost:8080") == Target("localhost", 8080, False, "localhost", 50051)
    assert parse_url("weaviate://db") == Target("db", 8080, False, "db", 50051, DEFAULT_COLLECTION)
    assert parse_url("weaviates://w.example.com") == Target("w.example.com", 443, True, "w.example.com", 443)
    assert parse_url("weaviate://10.0.0.5:18080?grpc=15051&collection=MnemeEventV2") == Target(
        "10.0.0.5", 18080, False, "10.0.0.5", 15051, "MnemeEventV2")
    assert parse_url("weaviates://w.example.com?grpc_host=grpc-w.example.com").grpc_host == "grpc-w.example.com"


@pytest.mark.parametrize("url", ["sqlite:///x.db", "weaviate://", "weaviate://h:8080?grpc=abc",
                                 "weaviate://h:8080?grpc=70000", "weaviate://h:99999",
                                 "weaviate://h?collection=lower_case", "weaviate://h?collection=Bad-Name",
                                 "weaviate://h?colection=Typo"])
def test_bad_urls_are_configuration_errors(url):
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_tenant_names_are_deterministic_valid_and_distinct_per_user():
    name = tenant_name("default", "用户-1")
    assert name == tenant_name("default", "用户-1")
    assert TENANT_NAME.fullmatch(name)
    names = {tenant_name(t, u) for t, u in [("default", "用户-1"), ("default", "用户-2"), ("other", "用户-1"),
                                            ("a", "b c"), ("a b", "c"), ("", "u"), ("default", "x" * 5000)]}
    assert len(names) == 7 and all(TENANT_NAME.fullmatch(n) for n in names)


def test_object_ids_are_uuid5_of_the_event_id():
    assert object_id("ev-1") == object_id("ev-1") == generate_uuid5("ev-1")
    assert object_id("ev-1") != object_id("ev-2")
    assert uuid.UUID(object_id("ev-1")).version == 5


def test_an_unreachable_server_is_a_transient_error_and_fails_fast():
    http, rpc = free_port(), free_port()  # nothing listens on either
    started = time.monotonic()
    with pytest.raises(TransientError):
        WeaviateEpisodicStore.from_url(f"weaviate://127.0.0.1:{http}?grpc={rpc}", Settings())
    with pytest.raises(TransientError):  # the registry knows the scheme and reaches the same adapter
        open_backend("episodic", f"weaviates://127.0.0.1:{http}?grpc={rpc}", Settings())
    assert time.monotonic() - started < 10


class _Unavailable(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE


def test_only_unavailability_is_translated_to_transient():
    def raised(exc: BaseException) -> BaseException:
        try:
            with _boundary("test"):
                raise exc
        except BaseException as got:  # noqa: BLE001 - the test inspects whatever came out
            return got
        raise AssertionError("nothing raised")

    assert isinstance(raised(WeaviateConnectionError("refused")), TransientError)
    try:  # how the client reports a gRPC failure: a query error raised while handling the RpcError
        try:
            raise _Unavailable()
        except grpc.RpcError as rpc:
            raise WeaviateQueryError("unavailable", "GRPC search") from rpc
    except WeaviateQueryError as wrapped:
        assert isinstance(raised(wrapped), TransientError)
    schema_error = WeaviateQueryError("no such property", "GRPC search")
    assert raised(schema_error) is schema_error
    assert not isinstance(raised(ValueError("bug")), TransientError)
    request = httpx.Request("POST", "http://weaviate/v1/objects")
    busy = UnexpectedStatusCodeError("busy", httpx.Response(503, request=request))
    invalid = UnexpectedStatusCodeError("invalid", httpx.Response(422, request=request))
    assert isinstance(raised(busy), TransientError) and raised(invalid) is invalid


def test_noise_is_stored_and_objects_written_before_it_existed_read_as_one():
    event = StoredEvent(event_id="e", tenant="t", user_id="u", session_id="s", ts=1.0, event_type=EventType.goal,
                        role=Role.user, lang="zh", text_hash="h", message_ids=["m"], confidence=0.8, noise=0.3,
                        sealed=b"\x00opaque", tokens=["k1", "k2"])
    props = _properties(event)
    assert props["noise"] == 0.3 and _event(props) == event
    del props["noise"]  # as gRPC returns an object that lacks the property
    assert _event(props) == event.model_copy(update={"noise": 1.0})
    assert _event({**props, "noise": None}).noise == 1.0


class _NoServer:
    """A client that fails any request: the store may be built, but nothing may be asked of it."""

    class collections:  # stands in for the client's attribute
        @staticmethod
        def use(name):
            return _NoServer()

    def __getattr__(self, name):
        raise AssertionError(f"request made: {name}")


def test_bad_updates_and_empty_calls_make_no_request():
    store = WeaviateEpisodicStore(_NoServer(), DEFAULT_COLLECTION)
    for fields in ({"confidence": 1.0}, {"weight": 2.0, "count": 3}, {"sealed": b"x"}):
        with pytest.raises(ValueError, match="updatable"):
            store.update("t", "u", ["e"], **fields)
    with pytest.raises(ValueError):
        store.update("t", "u", [], event_type="goal")
    assert store.update("t", "u", [], weight=2.0) == 0 and store.update("t", "u", ["e"]) == 0
    assert store.delete("t", "u", []) == 0
    assert store.dump("t", "u", statuses=()) == [] and store.dump("t", "u", limit=0) == []
    assert store.users(limit=0) == []
