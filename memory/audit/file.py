"""The embedded audit sink: an append-only, hash-chained JSON-lines file, ``file:///abs/path.jsonl``.

Format: one record per line, UTF-8, ending in ``\\n``. A line is the canonical JSON (keys sorted, no spaces,
non-ASCII kept as is) of the record plus two fields:

    prev   the ``hash`` of the line before it; ``"0" * 64`` on the first line
    hash   sha256 (hex) of the canonical JSON of the line without ``hash`` — the record plus ``prev``

So every line commits to all lines before it, and :func:`verify` finds the first line where that fails: an
edited record (its hash no longer matches), a removed, moved or inserted one (the next ``prev`` no longer
matches), a partial last line, a line that is not JSON. What a chain cannot show on its own: records cut off
the end, or a rewrite that recomputes every hash after the edit. The verdict names the last hash; keeping
it somewhere else (a ticket, another system) pins down what existed at that time.

Concurrency: the API and every Celery worker append to the same file. ``write`` takes an exclusive
``flock``, reads the last line's hash from the end of the file (never the whole file), appends all of its
records with one ``write`` (so they stay contiguous), fsyncs and unlocks; a reader (``settled_lines``,
``verify``) reads up to where the file ended while no writer held it. A writer that died mid-append
leaves a last line without its ``\\n``; that write was never acknowledged, so the next writer cuts it off
(with a warning) and chains from the last whole line. An append that fails (disk full) is cut back too.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memory.errors import ConfigurationError, InvalidInput, NotFound, TransientError
from memory.files import private_dir
from memory.settings import Settings

GENESIS = "0" * 64
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BLOCK = 8192

log = logging.getLogger("mneme.audit")


def canonical(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def chain_hash(body: Mapping[str, Any]) -> str:
    """The ``hash`` of a line whose other fields (the record and ``prev``) are ``body``."""
    return hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


def chained_line(record: Mapping[str, Any], prev: str) -> tuple[bytes, str]:
    """The line that stores ``record`` after a line whose hash is ``prev``, and this line's hash."""
    if "prev" in record or "hash" in record:
        raise InvalidInput(f"audit record {record.get('id')!r} has a 'prev' or 'hash' field: those are the chain's")
    body = {**record, "prev": prev}
    try:
        digest = chain_hash(body)
        line = (canonical({**body, "hash": digest}) + "\n").encode("utf-8")
    except (TypeError, ValueError) as exc:  # a set, NaN, a lone surrogate...: not storable as JSON text
        raise InvalidInput(f"audit record {record.get('id')!r} is not plain JSON: {exc}") from exc
    return line, digest


class VerifyReport(BaseModel):
    path: str
    ok: bool
    records: int  # records verified intact: all of them, or those before ``first_bad_line``
    first_bad_line: int | None = None  # 1-based
    reason: str | None = None
    last_hash: str = GENESIS  # of the last intact record: keep it elsewhere to anchor the chain

    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.path}: {self.records} records, chain intact, last hash {self.last_hash}"
        return (f"TAMPERED: {self.path}: line {self.first_bad_line}: {self.reason} "
                f"({self.records} records before it are intact)")


class _Broken(Exception):
    pass


def verify(path: Path | str) -> VerifyReport:
    """Walk the chain line by line and report the first line that breaks it. Raises ``NotFound`` if there
    is no such file."""
    path = Path(path)
    prev, count = GENESIS, 0
    for number, raw in enumerate(settled_lines(path), 1):
        try:
            prev = _check_line(raw, prev, number)
        except _Broken as exc:
            return VerifyReport(path=str(path), ok=False, records=count, first_bad_line=number,
                                reason=str(exc), last_hash=prev)
        count += 1
    return VerifyReport(path=str(path), ok=True, records=count, last_hash=prev)


def settled_lines(path: Path) -> Iterator[bytes]:
    """The file's lines as they were at a moment no writer was mid-append, so a live file is never read with
    half a write at its end: ``write`` holds an exclusive ``flock`` from reading the tail to the sync, and
    this takes a shared one just long enough to read the size. Lines end at ``b"\\n"`` only (U+2028 is data).
    Raises ``NotFound`` if there is no such file."""
    try:
        fh = path.open("rb")
    except FileNotFoundError as exc:
        raise NotFound(f"no audit file at {path}") from exc
    with fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        left = os.fstat(fh.fileno()).st_size
        fcntl.flock(fh, fcntl.LOCK_UN)
        for raw in fh:
            if left <= 0:
                return
            yield raw[:left]
            left -= len(raw)


def _check_line(raw: bytes, prev: str, number: int) -> str:
    """This line's hash if it is an intact record chained to ``prev``; raises ``_Broken`` saying why not."""
    if not raw.endswith(b"\n"):
        raise _Broken("partial last line (no newline): a write was cut short or the file was truncated")
    try:
        text = raw[:-1].decode("utf-8")
        obj = json.loads(text)
    except ValueError as exc:
        raise _Broken(f"not a JSON line ({exc})") from None
    if not isinstance(obj, dict):
        raise _Broken("not a JSON object")
    digest, linked = obj.pop("hash", None), obj.get("prev")
    if not (isinstance(digest, str) and _HEX64.fullmatch(digest) and isinstance(linked, str)
            and _HEX64.fullmatch(linked)):
        raise _Broken("not a chained record (no valid prev/hash fields)")
    try:
        same_text = canonical({**obj, "hash": digest}) == text
    except ValueError:
        same_text = False
    if not same_text or chain_hash(obj) != digest:
        raise _Broken("hash mismatch: the record was edited")
    if linked != prev:
        if number == 1:
            raise _Broken("the first line does not start the chain: records before it were removed")
        raise _Broken(f"prev is not the hash of line {number - 1}: a record was removed, inserted or moved here")
    return digest


class FileAuditLog:
    def __init__(self, path: Path) -> None:
        self._path = path
        private_dir(path.parent)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> FileAuditLog:
        return cls(Path(url.removeprefix("file://")))

    @property
    def path(self) -> Path:
        return self._path

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        if not records:
            return
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until close: one writer at a time, across processes
            prev = self._last_hash(fd)
            lines = bytearray()
            for r in records:
                line, prev = chained_line(r, prev)
                lines += line
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, bytes(lines))
                os.fsync(fd)
            except OSError as exc:
                _cut_back(fd, start)
                raise TransientError(f"cannot append to the audit log {self._path}: {exc}") from exc
        finally:
            os.close(fd)  # releases the lock

    def ping(self) -> None:
        os.close(self._open())

    def _open(self) -> int:
        try:
            return os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ConfigurationError(f"cannot open the audit log {self._path}: {exc}") from exc

    def _last_hash(self, fd: int) -> str:
        """The hash of the last whole line (``GENESIS`` if none), after cutting off a torn tail. Reads
        backwards from the end, a block at a time."""
        size = os.fstat(fd).st_size
        end = _line_start(fd, size)  # just after the last b"\n"
        if end < size:
            log.warning("audit log %s: cutting off %d bytes of an unfinished write", self._path, size - end)
            os.ftruncate(fd, end)
        if end == 0:
            return GENESIS
        start = _line_start(fd, end - 1)
        raw = os.pread(fd, end - start, start)
        try:
            digest = json.loads(raw).get("hash")
        except (ValueError, AttributeError):
            digest = None
        if isinstance(digest, str) and _HEX64.fullmatch(digest):
            return digest
        log.warning("audit log %s: the last line is not a chained record; starting a new chain after it "
                    "(`mneme audit verify` will report it)", self._path)
        return GENESIS


def _line_start(fd: int, limit: int) -> int:
    """Offset just after the last b"\\n" before ``limit`` (0 if there is none)."""
    pos = limit
    while pos > 0:
        step = min(_BLOCK, pos)
        pos -= step
        found = os.pread(fd, step, pos).rfind(b"\n")
        if found >= 0:
            return pos + found + 1
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _cut_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        log.exception("audit log: could not cut a failed append back to %d bytes", size)
