"""Observability: Prometheus metrics (one process, many processes, the running stack) and JSON logs with
request and task ids. Redis is the stack's real Valkey; the HTTP parts run a small FastAPI app with
``workers.api.observability.install`` and, end to end, the stack's own API and Celery workers."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mneme_client import MnemeClient

from memory import extraction, logs, telemetry
from memory.llm import LLMExtractor
from memory.models import Message, Role
from memory.settings import Settings
from memory.state import keys
from memory.state.broker import Broker
from memory.state.client import connect
from tests.llm_stub import StubLLM
from tests.metrics import sample
from tests.stacks import running_stack
from workers.api.observability import install
from workers.celery_app import QUEUES
from workers.local.stack import free_port


def json_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(errors="replace").splitlines() if line.startswith("{")]


@pytest.fixture
def captured():
    """JSON lines of every log record reaching the root logger, formatted where they are emitted."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter("test"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


# --- logs ------------------------------------------------------------------------------------------------

def test_json_formatter_writes_one_object_per_line_with_context(captured):
    logs.bind_task("t-1", "memory.extract", "r-1")
    try:
        try:
            raise ValueError("速度 ≠ 加速度")
        except ValueError:
            logging.getLogger("mneme.pipeline").exception("stage %s failed", "extract", extra={"job": "j1"})
    finally:
        logs.clear_task()
    logging.getLogger("mneme.pipeline").info("after")
    # Celery passes a task's args and kwargs as extra "data": other libraries' extras never reach the log
    logging.getLogger("celery.app.trace").info("Task done", extra={"data": {"kwargs": "秘密"}})
    first, after, celery_line = captured()
    assert first["message"] == "stage extract failed" and first["level"] == "ERROR"
    assert first["logger"] == "mneme.pipeline" and first["service"] == "test" and first["job"] == "j1"
    assert (first["task_id"], first["task_name"], first["request_id"]) == ("t-1", "memory.extract", "r-1")
    assert "ValueError: 速度 ≠ 加速度" in first["exc_info"] and first["ts"].endswith("+00:00")
    assert (after["task_id"], after["task_name"], after["request_id"]) == (None, None, None)
    assert "data" not in celery_line and "秘密" not in json.dumps(celery_line, ensure_ascii=False)


def test_configure_logging_is_idempotent_and_routes_uvicorn_through_root():
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    uvicorn, access = logging.getLogger("uvicorn"), logging.getLogger("uvicorn.access")
    saved = [(lg, list(lg.handlers), lg.propagate) for lg in (uvicorn, access)]
    uvicorn.handlers, uvicorn.propagate = [logging.NullHandler()], False  # as uvicorn configures itself
    access.handlers, access.propagate = [], False  # as --no-access-log leaves it
    try:
        logs.configure_logging("api")
        logs.configure_logging("api")
        ours = [h for h in root.handlers if isinstance(h.formatter, logs.JsonFormatter)]
        assert len(ours) == 1 and ours[0].formatter.service == "api"
        assert all(h in root.handlers for h in before)  # others' handlers (pytest's) are kept
        assert uvicorn.handlers == [] and uvicorn.propagate  # uvicorn's lines now go through the root, as JSON
        assert access.handlers == [] and not access.propagate  # a silenced access log stays silent
    finally:
        for h in [h for h in root.handlers if h not in before]:
            root.removeHandler(h)
        root.setLevel(level)
        for lg, handlers, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate


# --- HTTP: request ids, latency, /metrics on an app of our own ------------------------------------------

@pytest.fixture
def app_client(runtime):
    app = FastAPI()

    @app.get("/items/{item_id}")
    def item(item_id: str) -> dict:
        logging.getLogger("mneme.test").info("serving an item")
        return {"item": item_id}

    @app.get("/boom")
    def boom() -> dict:
        raise RuntimeError("boom")

    install(app, runtime.state.broker, queues=QUEUES, service=None)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_request_id_is_echoed_and_bound_to_the_request_logs(app_client, captured):
    response = app_client.get("/items/u-secret", headers={"X-Request-ID": "req-abc.1"})
    assert response.status_code == 200 and response.headers["X-Request-ID"] == "req-abc.1"
    lines = [line for line in captured() if line["request_id"] == "req-abc.1"]
    assert [line["logger"] for line in lines] == ["mneme.test", "mneme.http"]  # the endpoint's, then the access line
    access = lines[-1]
    assert (access["method"], access["route"], access["status"]) == ("GET", "/items/{item_id}", 200)
    assert "u-secret" not in json.dumps(lines)  # the route template is logged, never the path

    made = app_client.get("/items/1").headers["X-Request-ID"]
    assert uuid.UUID(made).version == 4
    replaced = app_client.get("/items/1", headers={"X-Request-ID": "no spaces or newlines\n" + "x" * 200})
    assert uuid.UUID(replaced.headers["X-Request-ID"]).version == 4


def test_latency_histogram_labels_route_templates_and_statuses(app_client):
    def count(route: str, status: str) -> float:
        body = app_client.get("/metrics").text
        return sample(body, "mneme_http_request_seconds_count", method="GET", route=route, status=status) or 0

    before = {k: count(*k) for k in [("/items/{item_id}", "200"), ("unmatched", "404"), ("/boom", "500")]}
    app_client.get("/items/a")
    app_client.get("/items/b")
    assert app_client.get("/nowhere/at/all").status_code == 404
    assert app_client.get("/boom").status_code == 500
    assert count("/items/{item_id}", "200") == before[("/items/{item_id}", "200")] + 2
    assert count("unmatched", "404") == before[("unmatched", "404")] + 1
    assert count("/boom", "500") == before[("/boom", "500")] + 1
    response = app_client.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "/nowhere" not in response.text


# --- metrics ---------------------------------------------------------------------------------------------

def test_queue_depth_and_dead_letters_are_read_live_from_redis(runtime, uid):
    r = runtime.state.client
    busy, idle = f"obs-{uid}-busy", f"obs-{uid}-idle"
    try:
        r.rpush(busy, "a", "b", "c")
        r.rpush(busy + "\x06\x169", "urgent", "urgent")  # kombu's list for priority 9 of the same queue
        body, content_type = telemetry.render_metrics(Broker(r), [busy, idle])
        text = body.decode()
        assert sample(text, "mneme_queue_depth", queue=busy) == 5
        assert sample(text, "mneme_queue_depth", queue=idle) == 0
        assert sample(text, "mneme_dead_letters") == r.llen(keys.DEAD_LETTERS)
        assert content_type.startswith("text/plain; version=0.0.4")
    finally:
        r.delete(busy, busy + "\x06\x169")


def test_unreachable_redis_leaves_queue_gauges_out_but_serves_the_rest():
    down = Broker(connect(f"redis://127.0.0.1:{free_port()}/0"))
    text = telemetry.render_metrics(down, QUEUES)[0].decode()
    assert sample(text, "mneme_queue_depth") is None and sample(text, "mneme_dead_letters") is None
    assert "# TYPE mneme_recall_seconds histogram" in text


def test_llm_tokens_are_counted_per_tenant_where_the_budget_is_charged(runtime, uid):
    tenant = f"obs-{uid}"
    message = Message(tenant=tenant, user_id="u1", session_id="s1", message_id="m1", role=Role.user,
                      content="我今年17岁", client_ts=1764474000.0)
    with StubLLM() as stub:
        stub.reply_json({"events": [{"event_type": "age_declaration", "keywords": ["17岁"], "summary": "17岁"}]})
        settings = Settings(_env_file=None, llm_base_url=stub.base_url, llm_model="stub", llm_daily_token_budget=10_000)
        with LLMExtractor(settings, runtime.state.llm_usage) as llm:
            _, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.used_llm and outcome.tokens == 360
    assert telemetry.REGISTRY.get_sample_value("mneme_llm_tokens_total", {"tenant": tenant}) == 360


CHILD = """
from prometheus_client import Counter
from memory import telemetry
with telemetry.observe_working("append"):
    pass
telemetry.TASK_SECONDS.labels("memory.extract", "SUCCESS").observe(0.2)
Counter("flower_events", "another library's metric").inc()
"""


def test_multiprocess_mode_sums_every_process_and_serves_mneme_metrics_only(tmp_path, runtime, monkeypatch):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two processes, as the API and a worker are
        subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    text = telemetry.render_metrics(runtime.state.broker, QUEUES)[0].decode()
    assert sample(text, "mneme_working_memory_ops_total", op="append") == 2
    assert sample(text, "mneme_task_seconds_count", task="memory.extract", state="SUCCESS") == 2
    assert sample(text, "mneme_task_seconds_sum", task="memory.extract", state="SUCCESS") == pytest.approx(0.4)
    assert "flower_events" not in text
    assert all(sample(text, "mneme_queue_depth", queue=q) is not None for q in QUEUES)


# --- end to end: the stack's API and workers -------------------------------------------------------------

def test_stack_serves_metrics_of_every_process_and_writes_json_logs_with_ids(stack, client, uid):
    rid = f"obs-{uid}"
    user, session = f"u{uid}", f"s{uid}"
    first = httpx.post(f"{stack.api_url}/v1/messages", headers={"X-Request-ID": rid}, timeout=30, json={
        "user_id": user, "session_id": session, "message_id": "m1", "role": "user",
        "content": "我今年17岁，上高二", "client_ts": time.time()})
    assert first.status_code == 202 and first.headers["X-Request-ID"] == rid
    job_ids = [first.json()["job_id"]]
    job_ids.append(client.remember(user_id=user, session_id=session, message_id="m2", role="user",
                                   content="I like learning physics with animations").job_id)
    assert [j.state for j in client.wait(job_ids, timeout=90)] == ["done", "done"]
    client.recall(user_id=user, query="我几岁？", session_id=session)

    def metrics() -> str:
        return httpx.get(f"{stack.api_url}/metrics", timeout=10).text

    deadline = time.monotonic() + 15  # a task's time is observed just after it marked its job done
    while True:
        body = metrics()
        tasks_seen = [sample(body, "mneme_task_seconds_count", task=t, state="SUCCESS") or 0
                      for t in ("memory.extract", "memory.embed")]
        if min(tasks_seen) > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert tasks_seen[0] >= 1 and tasks_seen[1] >= 1  # (batch runs) observed in the workers, served by the API
    assert (sample(body, "mneme_working_memory_ops_total", op="append") or 0) >= 2
    assert (sample(body, "mneme_working_memory_ops_total", op="read") or 0) >= 1  # recall read the session
    assert (sample(body, "mneme_recall_seconds_count") or 0) >= 1
    assert (sample(body, "mneme_http_request_seconds_count", method="POST", route="/v1/messages",
                   status="202") or 0) >= 2
    assert all(sample(body, "mneme_queue_depth", queue=q) is not None for q in QUEUES)
    assert sample(body, "mneme_dead_letters") is not None

    api_log = stack.logs / "api.log"
    lines = [line for line in api_log.read_text().splitlines() if line.strip()]
    assert all(line.startswith("{") for line in lines), [line for line in lines if not line.startswith("{")][:3]
    assert not any(line["logger"] == "uvicorn.access" for line in json_lines(api_log))  # --no-access-log holds
    mine = [line for line in json_lines(api_log) if line["request_id"] == rid]
    assert any(line.get("route") == "/v1/messages" and line["status"] == 202 for line in mine)
    assert all(line["service"] == "api" for line in mine)

    # each job's line names it, with the id of its HTTP request (carried in the task message and its follow-ups)
    extract = [line for line in json_lines(stack.logs / "worker-pipeline.log")
               if line["task_name"] == "memory.extract"]
    assert any(f"job {job_ids[0]}," in line["message"] and line["request_id"] == rid for line in extract)
    assert any(f"job {job_ids[1]}," in line["message"] for line in extract)
    assert {line["service"] for line in extract} == {"worker-pipeline"}
    assert all(line["task_id"] for line in json_lines(stack.logs / "worker-embed.log") if line["task_name"])


@pytest.mark.stack  # starts its own stack
def test_flower_lists_the_pipeline_tasks(tmp_path_factory, uid):
    """Workers send task events while Flower asks for them (not always: they cost CPU per task)."""
    with running_stack(tmp_path_factory, "flower", flower=True, MNEME_CONSENT_REQUIRED="false") as stack:
        user, password = stack.env["FLOWER_BASIC_AUTH"].split(":", 1)
        flower = httpx.Client(base_url=f"http://127.0.0.1:{stack.flower_port}", auth=(user, password), timeout=10)

        def seen() -> set[tuple[str, str]]:
            try:
                response = flower.get("/api/tasks")
            except httpx.TransportError:  # Flower still starting: the stack's readiness does not wait for it
                return set()
            return {(t["name"], t["state"]) for t in response.json().values()} if response.status_code == 200 else set()

        deadline = time.monotonic() + 120
        with MnemeClient(stack.api_url) as client:
            n = 0
            # the batched stages (embed, graph) too: each request sends its own events (tasks.batches.StageBatches)
            wanted = {(task, "SUCCESS") for task in ("memory.extract", "memory.embed", "memory.upsert_graph")}
            while not wanted <= seen():
                assert time.monotonic() < deadline, f"Flower shows {seen()}"
                client.wait([client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{n}",
                                             role="user", content=f"我喜欢物理第{n}课").job_id])
                n += 1
                time.sleep(1)
        flower.close()
