"""Cold archive on S3 or an S3-compatible server (MinIO, SeaweedFS): ``s3://bucket[/prefix]``.

Every key is stored as ``prefix/key``. Endpoint, credentials and region come from settings:
``s3_endpoint_url`` empty = AWS (virtual-hosted addressing); set = that server, path-style addressing
(``http://host:port/bucket/key``, what MinIO and SeaweedFS expect). Empty access and secret keys =
boto3's default credential chain (environment, profile, instance role); one without the other is a
configuration error. The bucket is created on first use when missing (idempotent).

- ``put`` is one PutObject: S3 replaces an object atomically.
- ``list`` follows the ListObjectsV2 paginator to the end (1,000 keys a page).
- ``delete_prefix`` lists first, then deletes in DeleteObjects batches of ≤1,000. In a versioned (or
  versioning-suspended) bucket it lists with ListObjectVersions and deletes every version and delete
  marker by id — erasure must not leave old versions behind; it returns the number of distinct keys.
- Integrity checksums only where an operation requires one (``when_required``): the newer botocore
  default (botocore ≥ 1.36) sends CRC32 trailers on every upload, which older S3-compatible servers reject.

Errors at the boundary: unreachable, timed out, 5xx, SlowDown → ``TransientError`` (after botocore's
own 3 attempts); NoSuchKey → ``NotFound``; AccessDenied, bad keys or signature, missing bucket,
missing credentials → ``ConfigurationError``. (On AWS, a missing key reads as AccessDenied unless the
credentials may ``s3:ListBucket``: grant it, with s3:Get/Put/DeleteObject, s3:DeleteObjectVersion,
s3:GetBucketVersioning, s3:ListBucketVersions and — unless the bucket exists — s3:CreateBucket.)

Verified against SeaweedFS 4.48 (``weed mini``, see ``tests/s3_server.py``): auth, pagination,
versioning and version deletion behave as on AWS; docker-compose runs MinIO for the same URL.
"""

from __future__ import annotations

import builtins
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore import exceptions as boto_errors
from botocore.config import Config

from memory.archive import check_key, check_prefix
from memory.errors import ConfigurationError, InvalidInput, MnemeError, NotFound, TransientError
from memory.settings import Settings

DELETE_BATCH = 1000
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

TRANSIENT_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                             "RequestTimeout", "InternalError", "ServiceUnavailable", "OperationAborted"})
CONFIGURATION_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled",
                                 "AccountProblem", "InvalidToken", "ExpiredToken", "RequestTimeTooSkewed",
                                 "NoSuchBucket", "InvalidBucketName", "BucketAlreadyExists", "PermanentRedirect",
                                 "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"})
NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})


@dataclass(frozen=True)
class Location:
    bucket: str
    prefix: str = ""  # "" or ends with "/"


def parse_url(url: str) -> Location:
    parts = urlsplit(url)
    if parts.scheme != "s3" or parts.username or parts.password or parts.port or parts.query or parts.fragment:
        raise ConfigurationError(f"expected s3://bucket[/prefix] for the archive (credentials go in settings), "
                                 f"got {url!r}")
    bucket = parts.hostname or ""
    if not BUCKET_NAME.fullmatch(bucket) or ".." in bucket or parts.netloc != bucket:
        raise ConfigurationError(f"bad S3 bucket name {parts.netloc!r}")
    prefix = parts.path.strip("/")
    try:
        check_prefix(prefix)
    except InvalidInput as exc:
        raise ConfigurationError(f"bad S3 key prefix in the archive URL: {exc.message}") from exc
    return Location(bucket, prefix + "/" if prefix else "")


def client_config(settings: Settings) -> Config:
    return Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30,
                  s3={"addressing_style": "path"} if settings.s3_endpoint_url else None,
                  request_checksum_calculation="when_required", response_checksum_validation="when_required",
                  user_agent_extra="mneme")


def make_client(settings: Settings) -> Any:
    if bool(settings.s3_access_key) != bool(settings.s3_secret_key):
        raise ConfigurationError("set both MNEME_S3_ACCESS_KEY and MNEME_S3_SECRET_KEY, or neither")
    session = boto3.session.Session(aws_access_key_id=settings.s3_access_key or None,
                                    aws_secret_access_key=settings.s3_secret_key or None,
                                    region_name=settings.s3_region or None)
    try:
        return session.client("s3", endpoint_url=settings.s3_endpoint_url or None, config=client_config(settings))
    except (ValueError, boto_errors.BotoCoreError) as exc:
        raise ConfigurationError(f"cannot build an S3 client: {exc}") from exc


def translate(exc: Exception, what: str) -> MnemeError:
    """A botocore error as Mneme's error tree sees it."""
    if isinstance(exc, boto_errors.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        detail = f"S3 {what}: {code or status} {error.get('Message', '')}".strip()
        if code in CONFIGURATION_CODES or status in (401, 403):
            return ConfigurationError(detail)
        if code in TRANSIENT_CODES or status >= 500 or status == 429:
            return TransientError(detail)
        if code in NOT_FOUND_CODES or status == 404:
            return NotFound(detail)
        return ConfigurationError(f"S3 refused {what}: {code or status} {error.get('Message', '')}".strip())
    if isinstance(exc, boto_errors.SSLError):  # a certificate problem does not go away by retrying
        return ConfigurationError(f"S3 {what}: {exc}")
    if isinstance(exc, boto_errors.ConnectionError | boto_errors.HTTPClientError | boto_errors.IncompleteReadError
                  | boto_errors.ChecksumError):
        return TransientError(f"S3 {what}: {exc}")
    return ConfigurationError(f"S3 {what}: {exc}")  # no credentials, no region, a bad parameter


@contextlib.contextmanager
def _boundary(what: str) -> Iterator[None]:
    try:
        yield
    except (boto_errors.ClientError, boto_errors.BotoCoreError) as exc:
        raise translate(exc, what) from exc


def _status(exc: boto_errors.ClientError) -> tuple[str, int]:
    return (str(exc.response.get("Error", {}).get("Code", "")),
            int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0))


class S3ColdStore:
    def __init__(self, client: Any, bucket: str, prefix: str = "", *, create_bucket: bool = True) -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix
        if create_bucket:
            self.ensure_bucket()

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> S3ColdStore:
        location = parse_url(url)
        client = make_client(settings)
        try:
            return cls(client, location.bucket, location.prefix)
        except BaseException:
            client.close()
            raise

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> S3ColdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure_bucket(self) -> None:
        """Create the bucket unless it exists; fine to call from several processes at once."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
            return
        except boto_errors.ClientError as exc:
            if _status(exc)[1] != 404:
                raise translate(exc, f"check bucket {self.bucket!r}") from exc
        except boto_errors.BotoCoreError as exc:
            raise translate(exc, f"check bucket {self.bucket!r}") from exc
        region = self._client.meta.region_name
        options = ({} if region in (None, "us-east-1")
                   else {"CreateBucketConfiguration": {"LocationConstraint": region}})
        try:
            self._client.create_bucket(Bucket=self.bucket, **options)
        except boto_errors.ClientError as exc:
            if _status(exc)[0] != "BucketAlreadyOwnedByYou":  # a concurrent creator won: fine
                raise translate(exc, f"create bucket {self.bucket!r}") from exc
        except boto_errors.BotoCoreError as exc:
            raise translate(exc, f"create bucket {self.bucket!r}") from exc

    def put(self, key: str, data: bytes) -> None:
        name = self.prefix + check_key(key)
        with _boundary(f"put {key!r}"):
            self._client.put_object(Bucket=self.bucket, Key=name, Body=data)

    def get(self, key: str) -> bytes:
        name = self.prefix + check_key(key)
        with _boundary(f"get {key!r}"):
            body = self._client.get_object(Bucket=self.bucket, Key=name)["Body"]
            with body:
                data: bytes = body.read()
                return data

    def list(self, prefix: str) -> builtins.list[str]:
        full = self.prefix + check_prefix(prefix)
        cut = len(self.prefix)
        with _boundary(f"list {prefix!r}"):
            pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full)
            return sorted(item["Key"][cut:] for page in pages for item in page.get("Contents", ()))

    def delete_prefix(self, prefix: str) -> int:
        if not check_prefix(prefix):
            raise InvalidInput("refusing to delete the whole archive: give a non-empty prefix")
        full = self.prefix + prefix
        with _boundary(f"delete {prefix!r}"):
            targets = self._versions(full) if self._versioned() else self._objects(full)
            for start in range(0, len(targets), DELETE_BATCH):
                self._delete_batch(targets[start:start + DELETE_BATCH])
        return len({t["Key"] for t in targets})

    def _versioned(self) -> bool:
        status = self._client.get_bucket_versioning(Bucket=self.bucket).get("Status")
        return status in ("Enabled", "Suspended")  # suspended buckets still hold old versions

    def _objects(self, full: str) -> builtins.list[dict[str, str]]:
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full)
        return [{"Key": item["Key"]} for page in pages for item in page.get("Contents", ())]

    def _versions(self, full: str) -> builtins.list[dict[str, str]]:
        pages = self._client.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=full)
        return [{"Key": item["Key"], "VersionId": item["VersionId"]}
                for page in pages for item in (*page.get("Versions", ()), *page.get("DeleteMarkers", ()))]

    def _delete_batch(self, targets: builtins.list[dict[str, str]]) -> None:
        answer = self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": targets, "Quiet": True})
        errors = [e for e in answer.get("Errors", ()) if e.get("Code") != "NoSuchKey"]  # gone already: fine
        if errors:
            first = errors[0]
            raise translate(boto_errors.ClientError({"Error": first}, "DeleteObjects"),
                            f"delete {len(errors)} objects, e.g. {first.get('Key')!r}")

    def ping(self) -> None:
        with _boundary(f"reach bucket {self.bucket!r}"):
            self._client.head_bucket(Bucket=self.bucket)
