"""What `make run` does around the stack itself: a taken port fails at once with one line that says how to
pick another, and each run's logs are kept apart (the newest also as logs/latest)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workers.local.stack import Stack

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


def test_each_run_keeps_its_logs_apart(tmp_path):
    first, second = Stack(tmp_path), Stack(tmp_path)
    assert first.logs != second.logs and first.logs.parent == second.logs.parent == tmp_path / "logs"
    assert (tmp_path / "logs" / "latest").resolve() == second.logs


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


@pytest.mark.stack
@pytest.mark.timeout(1200)  # its steps' own bounds: a venv 120 s, the install 600 s, the stack's run 300 s
def test_what_make_run_installs_is_enough_to_run_the_whole_stack(tmp_path):
    """`make run` installs the server and its client only (no test tools, no torch): a fresh venv with just that
    runs every process and remembers (a missing runtime dependency hid behind the test extras once)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "-q"]
    installed = subprocess.run([*pip, str(ROOT / "clients" / "python"), str(ROOT)], capture_output=True, text=True,
                               timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", SMOKE], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    beliefs, statuses, processes, beat = ran.stdout.strip().splitlines()
    assert "('occupation', '护士')" in beliefs and "('age', '17')" in beliefs
    assert statuses == "[200, 200, 200]"
    assert processes == "['api', 'flower', 'redis', 'worker-embed', 'worker-pipeline'] False"
    assert beat == "True", "beat did not start inside the pipeline worker"
