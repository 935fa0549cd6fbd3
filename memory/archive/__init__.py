"""The cold archive port: a flat key → bytes object store (a directory, or an S3 bucket), and the
backend-independent semantics written once — key names, the object format and the merge rule.

Layout: one object per (tenant, user, UTC day) at ``object_key(tenant, user_id, day)`` =
``{tenant_hash}/{user_hash}/{YYYY-MM-DD}.jsonl.gz``. The hashes are 24-hex-char sha256 prefixes, so no
raw tenant or user id ever appears in an object name, a bucket listing or an access log; the user hash
covers the tenant too, so one account id in two tenants gives two unrelated names. Erasing a user is
``delete_prefix(user_prefix(tenant, user_id))``.

An object is ``encode(records)``: gzip (mtime 0) of JSON lines with sorted keys and ``ensure_ascii=False``,
so the same records always give the same bytes. Archiving goes through :func:`archive_day`, which merges
into the day's object by ``event_id`` (new wins): archiving the same events twice changes nothing.

Keys are ``/``-separated segments of ``[A-Za-z0-9_.-]``: no leading ``/``, no empty, ``.`` or ``..``
segment (and no ``..`` at all). A prefix is a plain string prefix, as in S3: ``"a/b"`` covers
``a/b/x`` and ``a/bc``; end it with ``/`` to mean one "directory". Anything else is ``InvalidInput``.
"""

from __future__ import annotations

import builtins
import datetime as dt
import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Iterable
from typing import Any, Protocol

from memory.errors import InvalidInput, NotFound

KEY_CHARS = re.compile(r"[A-Za-z0-9/_.-]+")
MAX_KEY_LENGTH = 1024  # S3's limit, in bytes; our keys are ASCII
HASH_CHARS = 24
SUFFIX = ".jsonl.gz"
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class ColdStore(Protocol):
    def put(self, key: str, data: bytes) -> None:
        """Create or replace, atomically: a reader sees the old bytes or the new, never a part."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; ``NotFound`` if there is none."""
        ...

    def list(self, prefix: str) -> builtins.list[str]:
        """Every key starting with ``prefix`` (``""`` = all), sorted; never truncated."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under a non-empty ``prefix`` (every version, in a versioned bucket);
        return how many keys were removed."""
        ...

    def ping(self) -> None: ...


# --- keys --------------------------------------------------------------------------------------


def _valid(path: str) -> bool:
    return (len(path) <= MAX_KEY_LENGTH and KEY_CHARS.fullmatch(path) is not None and ".." not in path
            and all(segment not in ("", ".") for segment in path.split("/")))


def check_key(key: str) -> str:
    if not _valid(key):
        raise InvalidInput(f"bad archive key {key!r}: use '/'-separated segments of [A-Za-z0-9_.-]")
    return key


def check_prefix(prefix: str) -> str:
    """A prefix: ``""`` or the start of a valid key (it may end with ``/``)."""
    if prefix and not _valid(prefix.removesuffix("/")):
        raise InvalidInput(f"bad archive key prefix {prefix!r}: use '/'-separated segments of [A-Za-z0-9_.-]")
    return prefix


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:HASH_CHARS]


def user_prefix(tenant: str, user_id: str) -> str:
    """Every archived object of one user starts with this (ends with ``/``)."""
    if not tenant or not user_id:
        raise InvalidInput("tenant and user_id must be non-empty")
    return f"{_hash(tenant)}/{_hash(tenant, user_id)}/"


def object_key(tenant: str, user_id: str, day: str) -> str:
    """The object holding one user's archived records of one UTC day (``YYYY-MM-DD``)."""
    if not _DAY.fullmatch(day):
        raise InvalidInput(f"bad archive day {day!r}: expected YYYY-MM-DD")
    try:
        dt.date.fromisoformat(day)
    except ValueError as exc:
        raise InvalidInput(f"bad archive day {day!r}: {exc}") from exc
    return f"{user_prefix(tenant, user_id)}{day}{SUFFIX}"


# --- the object format -------------------------------------------------------------------------


def encode(records: Iterable[dict[str, Any]]) -> bytes:
    """gzip of one JSON object per line; the same records always give the same bytes."""
    lines = []
    for record in records:
        if not isinstance(record, dict):
            raise InvalidInput(f"archive records must be JSON objects, got {type(record).__name__}")
        try:
            lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                                    allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"archive records must be JSON objects: {exc}") from exc
    return gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), compresslevel=9, mtime=0)


def decode(data: bytes) -> list[dict[str, Any]]:
    if data[:2] != b"\x1f\x8b":
        raise InvalidInput("not an archive object: not gzip")
    try:
        text = gzip.decompress(data).decode("utf-8")
        records = [json.loads(line) for line in text.splitlines() if line]
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"not an archive object: {exc}") from exc
    if not all(isinstance(r, dict) for r in records):
        raise InvalidInput("not an archive object: a line is not a JSON object")
    return records


def merge_records(old: Iterable[dict[str, Any]], new: Iterable[dict[str, Any]],
                  key: str = "event_id") -> list[dict[str, Any]]:
    """The union by ``key`` (a record in ``new`` replaces the one in ``old``), sorted by ``key``."""
    merged: dict[str, dict[str, Any]] = {}
    for record in (*old, *new):
        value = record.get(key)
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"archive record without a string {key!r}")
        merged[value] = record
    return [merged[k] for k in sorted(merged)]


def archive_day(store: ColdStore, tenant: str, user_id: str, day: str, records: Iterable[dict[str, Any]],
                key: str = "event_id") -> int:
    """Merge ``records`` into the user's object for ``day``; return how many records it now holds.

    Idempotent (a redelivered archive task rewrites the same bytes), but a read-modify-write: callers
    must not archive one user's day from two workers at once (the maintenance task runs per user)."""
    name = object_key(tenant, user_id, day)
    try:
        old = decode(store.get(name))
    except NotFound:
        old = []
    merged = merge_records(old, records, key)
    if merged != old:
        store.put(name, encode(merged))
    return len(merged)
