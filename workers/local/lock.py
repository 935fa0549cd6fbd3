"""One stack per data dir: a stack holds an exclusive lock on ``<data_dir>/stack.lock`` for its life.

Two stacks on one data dir would run two Valkey servers on one append-only file, two beats and two sets of
workers over one set of stores. The lock is the kernel's (``fcntl.flock``): it goes with the process holding it
however that process ends, ``kill -9`` included, so a file left behind never blocks a start. The file also says
who holds it (the pid of the process that started the stack and its API URL), for the message a second start gets.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from memory.errors import Conflict

LOCK_FILE = "stack.lock"


class DataDirLock:
    """The held lock on one data dir; :meth:`release` (or the process's end) frees it."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd

    @classmethod
    def take(cls, data_dir: Path, api_url: str) -> DataDirLock:
        """The data dir's lock for this process, or :class:`~memory.errors.Conflict` naming the stack holding it.
        Refused, it touches nothing but the lock file's existence."""
        path = Path(data_dir) / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise Conflict(in_use(Path(data_dir), holder)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "api_url": api_url}).encode(), 0)
        return cls(Path(data_dir), fd)

    @staticmethod
    def check(data_dir: Path) -> None:
        """:class:`~memory.errors.Conflict` if a stack holds the data dir; creates nothing (a first start's
        refusals, a taken port or a missing key, leave no file behind)."""
        try:
            fd = os.open(Path(data_dir) / LOCK_FILE, os.O_RDONLY)
        except FileNotFoundError:  # no stack ever ran there
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: two checks at once do not refuse each other
        except BlockingIOError:
            raise Conflict(in_use(Path(data_dir), _holder(fd))) from None
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the lock releases it
            self._fd = None


def _holder(fd: int) -> dict[str, object]:
    try:
        held = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:  # being written this very moment
        return {}
    return held if isinstance(held, dict) else {}


def in_use(data_dir: Path, holder: dict[str, object]) -> str:
    pid, api_url = holder.get("pid"), holder.get("api_url")
    who = ", ".join(part for part in (f"API {api_url}" if api_url else "", f"pid {pid}" if pid else "") if part)
    stop = f"Ctrl-C where it runs, or kill {pid}" if pid else "Ctrl-C where it runs"
    return (f"another Mneme stack is running on the data dir {data_dir}" + (f" ({who})" if who else "")
            + f": one stack per data dir. Use that one, stop it first ({stop}), or give this one a data dir of its "
              f"own: MNEME_DATA_DIR=/another/dir make run")
