"""What the test servers (``tests/bolt_server.py``, ``tests/s3_server.py``) share: start in a temporary
directory on free ports, retry with other ports if one was taken meanwhile, say how long start-up took,
stop the child and remove its directory; usable as a context manager."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self


class ServerProcess:
    prefix = "mneme-server-"  # of the temporary directory
    error: type[RuntimeError] = RuntimeError

    def __init__(self, attempts: int = 3) -> None:
        self.attempts = attempts
        self.root: Path | None = None
        self.port = 0
        self.startup_s = 0.0
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float) -> Self:
        began = time.monotonic()
        self.root = Path(tempfile.mkdtemp(prefix=self.prefix))
        self._prepare(self.root)
        last: RuntimeError | None = None
        for attempt in range(self.attempts):
            try:
                self._start_once(self.root / f"run{attempt}", began + timeout)
                self.startup_s = time.monotonic() - began
                return self
            except self.error as exc:
                last = exc
                self._end_child()
        self.stop()
        raise self.error(f"no server after {self.attempts} attempts: {last}")

    def _prepare(self, root: Path) -> None:
        """Files every attempt shares (configuration)."""

    def _start_once(self, root: Path, deadline: float) -> None:
        raise NotImplementedError

    def _end_child(self) -> None:
        """Stop the server (the default: ``_end_group``)."""
        self._end_group()

    def _end_group(self) -> None:
        """SIGTERM to the child's whole process group (it was started with ``start_new_session``), SIGKILL if it
        lingers."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.poll()

    def stop(self) -> None:
        self._end_child()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"
