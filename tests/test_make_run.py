"""What `make run` does around the stack itself: a taken port fails at once with one line that says how to
pick another, and each run's logs are kept apart (the newest also as logs/latest)."""

import os
import socket
import subprocess
import sys

from workers.local.stack import Stack


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
