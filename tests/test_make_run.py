"""What `make run` does around the stack itself: a taken port fails at once with one line that says how to
pick another (a port a stopped stack just left is not taken), auth on without a master key refuses to start,
a data dir runs one stack at a time, each run's logs are kept apart (the newest also as logs/latest), and what it
installs runs the whole stack and the MCP server."""

import base64
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memory.crypto import load_master_key
from memory.errors import ConfigurationError, Conflict
from memory.settings import Settings
from workers.local.lock import DataDirLock
from workers.local.stack import Stack, free_port, taken

ROOT = Path(__file__).resolve().parents[1]


def test_a_taken_port_fails_with_one_line_saying_how_to_pick_another(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "workers.local.stack"], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "MNEME_API_PORT": str(port),
                                                "MNEME_DATA_DIR": str(tmp_path)})
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert f"port {port} is taken" in lines[0] and f"MNEME_API_PORT={port + 1} make run" in lines[0]
    assert not (tmp_path / "logs").exists()  # nothing was started


def test_a_port_is_free_again_as_soon_as_its_server_stopped():
    """`make run` right after a clean stop: the stopped server's connections wait in TIME_WAIT for a minute, and
    a port with nothing listening on it is free all the same."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and Valkey bind
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = server.accept()
            served.close()  # the server ends the connection, as it does when it stops: its end waits in TIME_WAIT
            assert client.recv(1) == b""
        assert taken(port)  # still listening
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the port check was: "taken" for a minute
    assert not taken(port)


def test_auth_on_without_a_master_key_refuses_to_start_naming_the_setting(tmp_path):
    done = subprocess.run([sys.executable, "-m", "workers.local.stack"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MNEME_AUTH_REQUIRED": "true", "MNEME_MASTER_KEY": "",
                               "MNEME_API_PORT": str(free_port()), "MNEME_FLOWER_PORT": str(free_port()),
                               "MNEME_DATA_DIR": str(tmp_path)})
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert "MNEME_AUTH_REQUIRED=true needs MNEME_MASTER_KEY" in lines[0] and "openssl rand -base64 32" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing started, no key made


def test_a_development_key_is_not_taken_once_auth_is_on(tmp_path):
    """A stack started with auth on refuses before any process starts, and says how to keep the key that
    development mode made in the data dir."""
    made = load_master_key(Settings(_env_file=None, data_dir=tmp_path))  # development mode: made once, kept
    stack = Stack(tmp_path, env={"MNEME_AUTH_REQUIRED": "true", "MNEME_MASTER_KEY": "", "MNEME_REDIS_URL": ""})
    with pytest.raises(ConfigurationError) as refused:
        stack.start()
    assert stack.procs == {}
    assert f"MNEME_MASTER_KEY=$(base64 -w0 {stack.data_dir / 'master.key'})" in refused.value.message
    given = Settings(_env_file=None, data_dir=tmp_path, auth_required=True, master_key=base64.b64encode(made).decode())
    assert load_master_key(given) == made
    with pytest.raises(ConfigurationError, match="MNEME_MASTER_KEY must be 32 bytes, base64-encoded"):
        load_master_key(given.model_copy(update={"master_key": "not base64!"}))


def test_each_run_keeps_its_logs_apart(tmp_path):
    first, second = Stack(tmp_path), Stack(tmp_path)
    assert not (tmp_path / "logs").exists()  # made when a run starts its first process: a refused one makes none
    first.open_run()
    second.open_run()
    assert first.logs != second.logs and first.logs.parent == second.logs.parent == tmp_path / "logs"
    assert (tmp_path / "logs" / "latest").resolve() == second.logs


HOLD = """
import sys, time
from pathlib import Path
from workers.local.lock import DataDirLock
DataDirLock.take(Path(sys.argv[1]), "http://127.0.0.1:18080")
print("held", flush=True)
time.sleep(600)
"""


def test_a_data_dir_is_one_stacks_until_that_stack_ends_however_it_ends(tmp_path):
    """The lock is the kernel's: a stack killed with -9 leaves its lock file, and the next start goes ahead."""
    with subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                          cwd=ROOT) as holder:
        try:
            assert holder.stdout.readline() == "held\n"
            for refuse in (lambda: DataDirLock.check(tmp_path), lambda: DataDirLock.take(tmp_path, "http://x")):
                with pytest.raises(Conflict) as refused:
                    refuse()
                assert refused.value.message.startswith(f"another Mneme stack is running on the data dir {tmp_path} "
                                                        f"(API http://127.0.0.1:18080, pid {holder.pid})")
        finally:
            holder.kill()  # -9
    assert (tmp_path / "stack.lock").exists()
    DataDirLock.check(tmp_path)
    DataDirLock.take(tmp_path, "http://y").release()


def test_a_second_stack_on_a_data_dir_in_use_is_refused_and_the_first_runs_on(stack):
    """Following `make run`'s "port taken" hint in the same checkout started a second stack on the same data dir
    (a second Valkey on the same append-only file): on other ports, it is refused, naming the first."""
    data = stack.data_dir

    def what_the_first_has() -> dict:
        return {"state": (data / "stack.json").read_bytes(), "lock": (data / "stack.lock").read_bytes(),
                "runs": sorted((data / "logs").iterdir()), "latest": (data / "logs" / "latest").resolve(),
                "pids": {name: proc.pid for name, proc in stack.procs.items()}}

    before = what_the_first_has()
    metrics = set((data / "metrics").glob("*.db"))
    second = Stack(data, api_port=free_port(), flower_port=free_port(), beat=False, flower=False,
                   env={"MNEME_REDIS_URL": ""})
    with pytest.raises(Conflict) as refused:
        second.start(wait_embedder=False)
    assert second.procs == {}
    said = f"another Mneme stack is running on the data dir {data} (API {stack.api_url}, pid {os.getpid()})"
    assert refused.value.message.startswith(said) and "MNEME_DATA_DIR=" in refused.value.message
    second.stop()

    done = subprocess.run([sys.executable, "-m", "workers.local.stack"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MNEME_DATA_DIR": str(data), "MNEME_REDIS_URL": "",
                               "MNEME_API_PORT": str(free_port()), "MNEME_FLOWER_PORT": str(free_port())})
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith(said), lines

    assert what_the_first_has() == before and metrics <= set((data / "metrics").glob("*.db"))
    assert all(proc.poll() is None for proc in stack.procs.values())
    assert httpx.get(f"{stack.api_url}/healthz", timeout=10).status_code == 200


SMOKE = """
import pathlib, sys, tempfile, time, httpx
from workers.local.stack import Stack, free_port
from mneme_client import MnemeClient
stack = Stack(pathlib.Path(tempfile.mkdtemp()), api_port=free_port(), flower_port=free_port(),
              env={"MNEME_REDIS_URL": ""})
stack.start()
try:
    with MnemeClient(stack.api_url) as mneme:
        mneme.consent("u1")
        job = mneme.remember(user_id="u1", session_id="s1", message_id="m1", content="我今年17岁，我是一名护士")
        assert mneme.wait([job.job_id])[0].state == "done"
        print(sorted((b.relation, b.object) for b in mneme.profile("u1").beliefs))
        print([httpx.get(stack.api_url + p).status_code for p in ("/memory", "/docs", "/healthz")])
        print(sorted(stack.procs), "torch" in sys.modules)
        deadline = time.monotonic() + 60  # beat runs as a thread of the pipeline worker: its schedule file
        while not list(stack.data_dir.glob("celerybeat-schedule*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        print(bool(list(stack.data_dir.glob("celerybeat-schedule*"))))
finally:
    stack.stop()
"""


MCP_SMOKE = """
import sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def tools():
    params = StdioServerParameters(command=sys.executable, args=["-m", "workers.mcp_server"], env={})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(sorted(t.name for t in (await session.list_tools()).tools))

anyio.run(tools)
"""


def make_run_installs(venv: Path) -> list[str]:
    """What `make run` has pip install into ``venv`` (its recipe, as `make -n` prints it), editable or not."""
    recipe = subprocess.run(["make", "-n", "install", f"VENV={venv}", f"PYTHON={sys.executable}"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout
    [line] = [line for line in recipe.splitlines() if " -m pip install " in line and "--upgrade pip" not in line]
    places = [arg.strip("'\"").partition("[") for arg in line.split(" -m pip install ", 1)[1].split() if arg != "-e"]
    return [f"{(ROOT / path).resolve()}{bracket}{extras}" for path, bracket, extras in places]  # make runs in ROOT


def test_make_run_installs_the_server_its_client_and_the_mcp_sdk():
    assert make_run_installs(Path("/v")) == [f"{ROOT}/clients/python", f"{ROOT}[mcp]"]


def test_the_mcp_server_without_its_sdk_says_how_to_install_it():
    """It ended in a bare ModuleNotFoundError once (`make run` did not install the extra)."""
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.modules['mcp'] = None; "
                           "runpy.run_module('workers.mcp_server', run_name='__main__')"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert f"{sys.executable} -m pip install -e '.[mcp]'" in lines[0] and "Traceback" not in lines[0]


@pytest.mark.stack
@pytest.mark.timeout(1200)  # its steps' own bounds: a venv 120 s, the install 600 s, the stack's run 300 s
def test_what_make_run_installs_is_enough_to_run_the_whole_stack(tmp_path):
    """`make run` installs the server, its client and the MCP SDK only (no test tools, no torch): a fresh venv with
    just that runs every process and remembers (a missing runtime dependency hid behind the test extras once), and
    runs the MCP server (it ended in ModuleNotFoundError once)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "-q"]
    installed = subprocess.run([*pip, *make_run_installs(venv)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", SMOKE], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    beliefs, statuses, processes, beat = ran.stdout.strip().splitlines()
    assert "('occupation', '护士')" in beliefs and "('age', '17')" in beliefs
    assert statuses == "[200, 200, 200]"
    assert processes == "['api', 'flower', 'redis', 'worker-embed', 'worker-pipeline'] False"
    assert beat == "True", "beat did not start inside the pipeline worker"
    mcp = subprocess.run([str(venv / "bin" / "python"), "-c", MCP_SMOKE], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert mcp.stdout.strip() == "['consent', 'forget', 'profile', 'recall', 'remember']", mcp.stderr[-3000:]
