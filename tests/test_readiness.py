"""Ready means ready: after a start on a busy machine, /healthz says `loading` until the query embedder has
encoded once, and the first recall after it says `ok` returns the user's memories, not a degraded layer."""

import multiprocessing as mp
import time

import httpx
import pytest
from mneme_client import MnemeClient

from tests.stacks import running_stack


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@pytest.mark.stack  # starts its own stack
def test_the_first_recall_after_a_restart_under_load_returns_events(tmp_path_factory, uid):
    with running_stack(tmp_path_factory, "restart", MNEME_CONSENT_REQUIRED="false") as stack:
        user = f"u{uid}"
        with MnemeClient(stack.api_url) as client:
            jobs = [client.remember(user_id=user, session_id=f"{user}-s", message_id=f"m{i}", role="user",
                                    content=text, client_ts=time.time() - 3600 + i).job_id
                    for i, text in enumerate(["我在学打网球，教练叫老周", "My tennis racket is a Wilson Blade"])]
            assert all(j.state == "done" for j in client.wait(jobs, timeout=120))

        stop = mp.Event()
        hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(3)]  # a loaded 2-core box
        for hog in hogs:
            hog.start()
        try:
            stack.stop_one("api")
            stack.start_one("api")
            seen, deadline = [], time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    r = httpx.get(stack.api_url + "/healthz", timeout=5)
                except httpx.TransportError:
                    time.sleep(0.1)  # not listening yet: poll again
                    continue
                body = r.json()
                seen.append((r.status_code, body["status"], body["backends"]["embedder"]))
                if body["status"] == "ok":
                    break
            assert seen and seen[-1] == (200, "ok", "ok"), seen[-5:]
            assert all(s == (503, "loading", "loading") for s in seen[:-1]), seen  # never ok before it can answer
            for query in ("我的网球教练叫什么？", "which racket do I play with?"):
                r = httpx.post(stack.api_url + "/v1/recall", json={"user_id": user, "query": query, "k": 3},
                               timeout=60)
                body = r.json()
                assert r.status_code == 200 and body["degraded"] == {} and body["events"], body
        finally:
            stop.set()
            for hog in hogs:
                hog.join(5)
