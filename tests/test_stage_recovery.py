"""A stage that stops making progress is reported, and a killed embed worker is started again and recovers on a
loaded box."""

import json
import multiprocessing as mp
import os
import signal
import time

import httpx
import pytest
from mneme_client import MnemeClient

from tests.stacks import running_stack


@pytest.fixture(scope="module")
def sstack(tmp_path_factory):
    with running_stack(tmp_path_factory, "stages", MNEME_STAGE_STALL_AFTER_S="5",
                       MNEME_CONSENT_REQUIRED="false") as stack:
        yield stack


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _post(client, user: str, texts: list[str]) -> list[str]:
    return [client.remember(user_id=user, session_id=f"{user}-s", message_id=f"m{i}-{time.time_ns()}",
                            role="user", content=text, client_ts=time.time()).job_id for i, text in enumerate(texts)]


def _health(stack) -> dict:
    return httpx.get(stack.api_url + "/healthz", timeout=10).json()


def test_a_stage_whose_queue_grows_while_nothing_finishes_makes_healthz_degraded(sstack, uid):
    with MnemeClient(sstack.api_url) as client:  # every stage has started and finished work once
        assert [j.state for j in client.wait(_post(client, f"w{uid}", ["热身 warm-up"]), timeout=180)] == ["done"]
    assert _health(sstack)["status"] == "ok"
    sstack.stop_one("worker-embed")
    try:
        with MnemeClient(sstack.api_url) as client:
            jobs = _post(client, f"u{uid}", ["我喜欢爬山", "I collect old maps"])
            deadline, body = time.monotonic() + 60, {}
            while time.monotonic() < deadline:
                body = _health(sstack)
                if "stage:embed" in body["backends"]:
                    break
                assert body["status"] == "ok", json.dumps(body)  # nothing else is wrong meanwhile
                time.sleep(0.5)
            assert body["status"] == "degraded" and body["backends"]["stage:embed"].startswith("stalled: "), body
            assert "stage:extract" not in body["backends"]  # the stage that works is not blamed
    finally:
        sstack.start_one("worker-embed")
    with MnemeClient(sstack.api_url) as client:
        assert all(j.state == "done" for j in client.wait(jobs, timeout=180))
    deadline = time.monotonic() + 60
    while _health(sstack)["status"] != "ok":
        assert time.monotonic() < deadline, _health(sstack)
        time.sleep(0.5)


def test_a_killed_embed_worker_is_started_again_and_working_on_a_loaded_box(sstack, uid):
    """The stack's supervisor (``Stack.revive``, what ``make run`` runs every half second) starts a worker
    killed with -9 again; on a box whose cores are taken by other work it loads its model and does its jobs."""
    proc = sstack.procs["worker-embed"]
    stop = mp.Event()
    hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(3)]
    for hog in hogs:
        hog.start()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        with MnemeClient(sstack.api_url) as client:
            jobs = _post(client, f"u{uid}", ["我在学日语", "My cat is called Miso", "我的目标是跑完半马"])
            assert sstack.revive() == ["worker-embed"]
            assert sstack.procs["worker-embed"].pid != proc.pid
            done = client.wait(jobs, timeout=240)  # the new one loads the model under load and works
        assert all(j.state == "done" for j in done), [(j.state, j.error) for j in done]
        assert sstack.revive() == []  # it stayed up
    finally:
        stop.set()
        for hog in hogs:
            hog.join(5)


def test_a_task_waiting_a_moment_on_a_stage_that_never_ran_is_not_a_stall(valkey_url):
    """A stall is a queue that held work every time it was asked for longer than the stall time with
    nothing finished meanwhile — not one audit task caught in the queue of a stage that has not run yet."""
    from memory.state import keys
    from memory.state.client import connect
    from memory.state.stages import StageProgress

    client = connect(valkey_url)
    client.delete(keys.STAGE_PROGRESS)
    stages = StageProgress(client)
    assert stages.stalled({"audit": 1}, 5, now=1000.0) == {}  # first seen holding work: not yet a stall
    assert stages.stalled({"audit": 0}, 5, now=1001.0) == {}  # drained: forgotten
    assert stages.stalled({"audit": 1}, 5, now=1002.0) == {}  # seen again: counted from here
    assert stages.stalled({"audit": 1}, 5, now=1006.0) == {}
    assert stages.stalled({"audit": 2}, 5, now=1008.0) == {"audit": "stalled: 2 queued, none finished for 6 s"}
    stages.note_progress("audit", now=1009.0)  # something finished: no stall from then on
    assert stages.stalled({"audit": 2}, 5, now=1010.0) == {}
