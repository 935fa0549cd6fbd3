"""The MCP server end to end: the official MCP client spawns `python -m workers.mcp_server` over stdio,
and every tool call goes through the server to the real API and workers of the test stack (and, for consent,
of a stack with the product defaults: long-term memory off until the user opts in)."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio.to_thread
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mneme_client import MnemeClient

from tests.polling import wait_until
from tests.stacks import running_stack
from workers.local.stack import free_port

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def consent_stack(tmp_path_factory):
    with running_stack(tmp_path_factory, "consent") as s:  # the product defaults: consent required
        yield s


@asynccontextmanager
async def mcp_session(api_url: str | None, log: Path, cwd: Path = ROOT, **env: str):
    """An initialised MCP client session with the server running as a subprocess over stdio; with no
    ``api_url``, the server is given no MNEME_API_URL (the client passes on no other MNEME_* variable)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "workers.mcp_server"], cwd=cwd,
                                   env={**({"MNEME_API_URL": api_url} if api_url else {}), **env})
    with log.open("a", encoding="utf-8") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                yield session
        except BaseException:
            errlog.flush()
            print(log.read_text(encoding="utf-8"), file=sys.stderr)  # the server's stderr, for the failure report
            raise


async def call(session: ClientSession, tool: str, **arguments) -> dict:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert json.loads(result.content[0].text) == result.structured_content  # the model reads the same JSON
    return result.structured_content


async def call_error(session: ClientSession, tool: str, **arguments) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return result.content[0].text


async def test_lists_five_tools_with_schemas(stack, tmp_path):
    async with mcp_session(stack.api_url, tmp_path / "mcp.log") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "profile", "forget", "consent"}
    required = {"remember": {"user_id", "session_id", "content"}, "recall": {"user_id", "query"},
                "profile": {"user_id"}, "forget": {"user_id"}, "consent": {"user_id"}}
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and set(schema["required"]) == required[name]
        assert tool.output_schema and tool.output_schema["type"] == "object"
        assert any("\u4e00" <= ch <= "\u9fff" for ch in tool.description), f"{name}: no Chinese guidance"
        assert "Use it" in tool.description, f"{name}: no guidance for when to use it"
    assert set(tools["remember"].input_schema["properties"]) == {
        "user_id", "session_id", "content", "role", "message_id", "device_id"}
    assert tools["remember"].input_schema["properties"]["role"]["enum"] == ["user", "assistant"]
    assert set(tools["recall"].input_schema["properties"]) == {"user_id", "query", "session_id", "k", "purpose"}
    assert tools["forget"].input_schema["properties"]["confirm"] == {
        "type": "boolean", "default": False, "title": "Confirm",
        "description": tools["forget"].input_schema["properties"]["confirm"]["description"]}
    assert tools["forget"].annotations.destructive_hint and tools["recall"].annotations.read_only_hint
    assert set(tools["consent"].input_schema["properties"]) == {"user_id", "long_term", "purposes"}
    # leaving out a purpose granted before withdraws it, which deletes what only it covered
    assert tools["consent"].annotations.destructive_hint and not tools["consent"].annotations.read_only_hint


async def test_remember_recall_profile_forget(stack, uid, tmp_path):
    user, session_id = f"u{uid}", f"s{uid}"
    async with mcp_session(stack.api_url, tmp_path / "mcp.log") as session:
        zh = await call(session, "remember", user_id=user, session_id=session_id, content="我今年16岁，上高一")
        en = await call(session, "remember", user_id=user, session_id=session_id, message_id="m-en",
                        content="I love chemistry", device_id="laptop")
        reply = await call(session, "remember", user_id=user, session_id=session_id, role="assistant",
                           content="好的，我记住了。Chemistry it is!")
        assert len(zh["message_id"]) == 32 and en["message_id"] == "m-en"  # a fresh uuid4 hex unless given
        assert [r["version"] for r in (zh, en, reply)] == [1, 2, 3] and not zh["duplicate"] and zh["in_window"]
        retry = await call(session, "remember", user_id=user, session_id=session_id, message_id="m-en",
                           content="I love chemistry", device_id="laptop")
        assert retry["duplicate"] and retry["job_id"] == en["job_id"]

        def wait() -> list:
            with MnemeClient(stack.api_url) as client:
                return client.wait([zh["job_id"], en["job_id"], reply["job_id"]])

        assert {job.state for job in await anyio.to_thread.run_sync(wait)} == {"done"}

        recalled = await call(session, "recall", user_id=user, query="我几岁？", session_id=session_id)
        facts = {(f["relation"], f["object"]): f for f in recalled["facts"]}
        assert {("age", "16"), ("likes", "chemistry")} <= set(facts)
        age = facts[("age", "16")]
        assert 0.1 <= age["confidence"] <= 1 and age["why"] and age["message_ids"] == [zh["message_id"]]
        assert recalled["events"][0]["type"] == "age_declaration"
        assert recalled["events"][0]["message_ids"] == [zh["message_id"]] and recalled["events"][0]["summary"]
        assert all(e["score"] > 0 for e in recalled["events"])
        assert [m["message_id"] for m in recalled["working"]] == [zh["message_id"], "m-en", reply["message_id"]]
        assert recalled["working"][0]["content"] == "我今年16岁，上高一" and recalled["degraded"] == {}

        english = await call(session, "recall", user_id=user, query="What subject do I like?", k=2)
        assert ("likes", "chemistry") in {(f["relation"], f["object"]) for f in english["facts"]}
        assert english["working"] == [] and len(english["events"]) <= 2

        def reads() -> list:  # the read audit names the MCP server as the agent that read
            with MnemeClient(stack.api_url) as client:
                return wait_until(lambda: len(r := client.reads(user).reads) >= 2 and r, 30, "two reads recorded")

        assert {(r.action, r.agent) for r in await anyio.to_thread.run_sync(reads)} == {("read.recall", "mcp")}

        prof = await call(session, "profile", user_id=user)
        beliefs = {(b["relation"], b["object"]): b for b in prof["beliefs"]}
        assert {("age", "16"), ("likes", "chemistry")} <= set(beliefs) and prof["user_id"] == user and prof["known"]
        assert beliefs[("likes", "chemistry")]["source"] == "rule"
        assert beliefs[("likes", "chemistry")]["message_ids"] == ["m-en"]
        assert "m-en" in beliefs[("likes", "chemistry")]["explanation"]
        assert 0.1 <= beliefs[("age", "16")]["confidence"] <= 1

        for refused in ({}, {"confirm": False}):
            message = await call_error(session, "forget", user_id=user, **refused)
            assert "Refused" in message and "confirm=true" in message and "Nothing was erased" in message
        assert len((await call(session, "profile", user_id=user))["beliefs"]) == len(prof["beliefs"])

        receipt = await call(session, "forget", user_id=user, confirm=True)
        assert receipt["complete"] and user not in json.dumps(receipt)  # the receipt names only a hash
        assert receipt["removed"]["graph_relations"] >= 2 and receipt["removed"]["episodic_events"] >= 2
        assert set(receipt["remaining"].values()) <= {0}

        # erased: nothing is stored for the user any more, and the profile says so
        assert await call(session, "profile", user_id=user) == {"user_id": user, "beliefs": [], "open_reviews": 0,
                                                                "known": False}
        after = await call(session, "recall", user_id=user, query="我几岁？", session_id=session_id)
        assert after["facts"] == [] and after["events"] == [] and after["working"] == []


async def test_an_agent_opts_its_user_in_and_out_of_long_term_memory(consent_stack, uid, tmp_path):
    user, session_id = f"u{uid}", f"s{uid}"

    async def remembered(session, content: str) -> None:
        job_id = (await call(session, "remember", user_id=user, session_id=session_id, content=content))["job_id"]

        def wait() -> list:
            with MnemeClient(consent_stack.api_url) as client:
                return client.wait([job_id])

        assert [job.state for job in await anyio.to_thread.run_sync(wait)] == ["done"]

    async def likes(session) -> set[str]:
        recalled = await call(session, "recall", user_id=user, query="What do I like? 我喜欢什么？")
        return {f["object"] for f in recalled["facts"] if f["relation"] == "likes"}

    async with mcp_session(consent_stack.api_url, tmp_path / "mcp.log") as session:
        before = await call(session, "consent", user_id=user)
        assert before == {"user_id": user, "long_term": False, "kept": False, "purposes": [],
                          "consent_required": True, "changed_at": None, "changed_by": None}
        await remembered(session, "I love chemistry")
        recalled = await call(session, "recall", user_id=user, query="What do I like?")
        assert recalled["facts"] == [] and "consent" in recalled["degraded"]["long_term"]

        opted_in = await call(session, "consent", user_id=user, long_term=True)
        assert opted_in["long_term"] and opted_in["kept"] and opted_in["changed_by"] == "mcp"
        assert abs(opted_in["changed_at"] - time.time()) < 60
        assert await call(session, "consent", user_id=user) == opted_in  # reading changes nothing
        await remembered(session, "我喜欢用动画学物理")
        assert await likes(session) == {"用动画学物理"}  # from now on, not what was said before
        assert ("likes", "用动画学物理") in {(b["relation"], b["object"])
                                            for b in (await call(session, "profile", user_id=user))["beliefs"]}

        withdrawn = await call(session, "consent", user_id=user, long_term=False)
        assert not withdrawn["long_term"] and not withdrawn["kept"] and withdrawn["consent_required"]
        assert await likes(session) == set()
        assert "consent" in (await call(session, "recall", user_id=user, query="我喜欢什么"))["degraded"]["long_term"]


async def test_finds_the_running_stack_without_variables(stack, client, uid, tmp_path):
    """An MCP client started in the project that `make run` serves, with no MNEME_* variable: the server
    finds the API through the stack's state file; a file left by a stack that died is named in the error."""
    user = f"u{uid}"
    client.wait([client.remember(user_id=user, session_id=f"s{uid}", message_id="m1", role="user",
                                 content="I love chemistry").job_id])
    project = tmp_path / "project"
    project.mkdir()
    (project / "var").symlink_to(stack.data_dir)  # the stack's data dir is this project's default one
    async with mcp_session(None, tmp_path / "mcp.log", cwd=project) as session:
        beliefs = (await call(session, "profile", user_id=user))["beliefs"]
        assert ("likes", "chemistry") in {(b["relation"], b["object"]) for b in beliefs}

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / "left" / "var"
    left.mkdir(parents=True)
    written = json.loads((stack.data_dir / "stack.json").read_text())
    (left / "stack.json").write_text(json.dumps({**written, "pids": {"api": int(ended.stdout)}}))
    async with mcp_session(None, tmp_path / "mcp-left.log", cwd=left.parent, MNEME_API_PORT=str(free_port())) \
            as session:
        message = await call_error(session, "profile", user_id=user)
        assert "unreachable" in message and "no longer running" in message and str(left / "stack.json") in message


async def test_errors_reach_the_agent_as_tool_errors(stack, uid, tmp_path):
    async with mcp_session(stack.api_url, tmp_path / "mcp.log") as session:
        # the input schema refuses an id the API would refuse, before any HTTP call
        message = await call_error(session, "recall", user_id="../admin", query="x")
        assert "user_id" in message
        # the API's own error is passed on: a message_id reused with other content is a 409
        sent = dict(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1")
        await call(session, "remember", content="first", **sent)
        message = await call_error(session, "remember", content="second", **sent)
        assert "Mneme API error 409 conflict" in message and "message_id" in message
    dead = f"http://127.0.0.1:{free_port()}"
    async with mcp_session(dead, tmp_path / "mcp-dead.log") as session:
        message = await call_error(session, "profile", user_id=f"u{uid}")
        assert "unreachable" in message and dead in message


async def test_api_key_is_sent_as_bearer_token(tmp_path):
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # a stand-in for the API that records the Authorization header
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"user_id": "u1", "beliefs": [], "open_reviews": [], "known": False}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    api = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{api.server_address[1]}"
        async with mcp_session(url, tmp_path / "mcp.log", MNEME_API_KEY="s3cret") as session:
            assert await call(session, "profile", user_id="u1") == {"user_id": "u1", "beliefs": [], "open_reviews": 0,
                                                                    "known": False}
    finally:
        api.shutdown()
        api.server_close()
        thread.join()
    assert seen == ["Bearer s3cret"]


async def test_streamable_http_transport(stack, uid, tmp_path):
    port = free_port()
    with (tmp_path / "mcp-http.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "workers.mcp_server", "--http", "--port", str(port)],
                                  cwd=ROOT, env={"PATH": os.environ.get("PATH", ""), "MNEME_API_URL": stack.api_url},
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60  # a cold interpreter importing the server
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert server.poll() is None and time.monotonic() < deadline, "MCP HTTP server did not start"
                    await anyio.sleep(0.1)
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                assert {t.name for t in (await session.list_tools()).tools} == {
                    "remember", "recall", "profile", "forget", "consent"}
                accepted = await call(session, "remember", user_id=f"u{uid}", session_id=f"s{uid}", content="hi")
                assert accepted["version"] == 1
                assert (await call(session, "profile", user_id=f"u{uid}"))["beliefs"] == []
        finally:
            server.terminate()
            server.wait(timeout=10)
