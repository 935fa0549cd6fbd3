"""The local stack runs the Celery workers below the API's CPU priority (``MNEME_WORKER_NICE``), so a busy
pipeline does not slow the API's answers: every process of a worker's session (a solo worker is one; anything
it starts inherits the session) and the session's autogroup, where the kernel has them, are niced; the API is not."""

from __future__ import annotations

from pathlib import Path


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name: [0] state … [3] session … [16] nice."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _session(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[3]) == sid:
                    pids.append(int(entry.name))
            except (OSError, IndexError):  # gone meanwhile
                continue
    return pids


def _nice(pid: int) -> int:
    return int(_stat(pid)[16])


def _autogroup_nice(pid: int) -> int | None:
    path = Path(f"/proc/{pid}/autogroup")
    return int(path.read_text().split("nice")[1]) if path.exists() else None


def test_workers_run_below_the_api(stack):
    nice = stack.settings.worker_nice
    assert nice > 0
    api = stack.procs["api"].pid
    assert _nice(api) == 0 and _autogroup_nice(api) in (None, 0)
    workers = [n for n in stack.procs if n.startswith("worker-")]
    assert workers
    for name in workers:
        members = _session(stack.procs[name].pid)
        assert stack.procs[name].pid in members, f"{name}: not the leader of its own session"
        for pid in members:
            assert _nice(pid) == nice, (name, pid)
            assert _autogroup_nice(pid) in (None, nice), (name, pid)
