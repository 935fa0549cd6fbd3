"""The Python client package (``clients/python``, ``mneme_client``): sync and async against the real API, every
endpoint, typed answers, errors by status, and retries of 429/503 that honour Retry-After. The retry test runs
the client against a small local HTTP server that answers 503 and 429 before it answers (a stand-in for a busy
API, which cannot be made busy on cue); everything else talks to the real stack."""

import asyncio
import http.server
import json
import threading
import time
import tomllib
from pathlib import Path
from types import ModuleType

import mneme_client
import pytest
from mneme_client import AsyncMnemeClient, InvalidRequest, MnemeClient, NotFound, Retries, Unavailable
from mneme_client.models import Belief, MessageAccepted, RecallResult

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_needs_only_httpx_and_pydantic_and_declares_its_public_surface():
    project = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    assert sorted(d.split(">")[0].split("=")[0] for d in project["dependencies"]) == ["httpx", "pydantic"]
    public = {n for n, v in vars(mneme_client).items() if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert set(mneme_client.__all__) == public


def test_sync_and_async_clients_have_the_same_typed_methods():
    sync = {n for n in dir(MnemeClient) if not n.startswith("_")} - {"close", "settings"}
    asynchronous = {n for n in dir(AsyncMnemeClient) if not n.startswith("_")} - {"aclose", "settings"}
    assert sync == asynchronous and len(sync) >= 30
    assert MnemeClient.recall.__annotations__ == AsyncMnemeClient.recall.__annotations__
    assert "RecallResult" in str(__import__("inspect").signature(MnemeClient.recall).return_annotation)


def test_every_endpoint_through_the_sync_client(stack, uid):
    user, session = f"u{uid}", f"s{uid}"
    with MnemeClient(stack.api_url, agent="client-test") as mneme:
        accepted = mneme.remember(user_id=user, session_id=session, message_id="m1", content="我今年16岁，我喜欢化学",
                                  window=True)
        assert isinstance(accepted, MessageAccepted) and accepted.window and accepted.window.messages
        mneme.remember(user_id=user, session_id=session, message_id="m2", role="assistant", content="好的，记住了")
        mneme.remember(user_id=user, session_id=session, message_id="m3", content="我讨厌排队")
        assert [j.state for j in mneme.wait([f.job_id for f in [accepted]])] == ["done"]
        mneme.wait([mneme.remember(user_id=user, session_id=session, message_id="m3", content="我讨厌排队").job_id])
        assert [m.message_id for m in mneme.messages(session).messages] == ["m1", "m2", "m3"]
        assert mneme.message(session, "m1").content == "我今年16岁，我喜欢化学"
        assert mneme.sessions(user).sessions[0].session_id == session
        recalled = mneme.recall(user_id=user, query="我几岁？", session_id=session)
        assert isinstance(recalled, RecallResult) and ("age", "16") in {(f.relation, f.object) for f in recalled.facts}
        assert mneme.events(user, include_text=True).events
        profile = mneme.profile(user)
        likes = next(b for b in profile.beliefs if b.relation == "likes")
        belief = mneme.correct(user, "age", "17")
        assert isinstance(belief, Belief) and belief.source == "human"
        steps = mneme.history(user, belief.rel_id).steps
        assert [s.action for s in steps][-1] == "merge:human" and steps[-1].after == pytest.approx(0.95)
        assert mneme.page_link(user).url.startswith(f"{stack.api_url}/memory#token=")
        assert mneme.feedback(user_id=user, useful=True, rel_id=belief.rel_id).target == belief.rel_id
        assert mneme.delete_belief(user, likes.rel_id) == likes.rel_id
        assert mneme.reviews(user) == []
        assert "occupation" in [r.name for r in mneme.vocabulary().relations]
        assert "tutoring" in mneme.purposes() and mneme.policy(user).keeps_long_term
        assert mneme.grant(user, "support").purposes
        assert mneme.consent(user, purposes=["support", "tutoring"]).withdrawal is not None  # the others withdrawn
        assert mneme.withdraw(user, "support").purposes == ["support"]
        receipt = mneme.delete_message(session, "m3")
        assert receipt.messages == ["m3"] and len(receipt.beliefs_removed) == 1  # dislikes 排队, only m3 said it
        assert [m.message_id for m in mneme.messages(session).messages] == ["m1", "m2"]
        assert mneme.delete_message(session, "m3").messages == []  # taken back before: nothing more
        assert mneme.rollback(session).removed[0].message_id == "m2"
        assert mneme.delete_events(user, "small_talk").deleted_events == 0
        assert mneme.export(user)["user_id"] == user and mneme.reads(user).user_id == user
        assert mneme.metrics() is not None and mneme.health().status in ("ok", "degraded")
        assert mneme.set_child(user, False).child is False
        assert mneme.delete_session(session).session_id == session
        assert mneme.erase(user).complete
        with pytest.raises(NotFound):
            mneme.messages(session, version=99)
        with pytest.raises(InvalidRequest) as err:
            mneme.recall(user_id=user, query="x", purpose="marketing")
        assert err.value.status == 400 and "marketing" in err.value.message


def test_a_never_seen_users_profile_says_so(stack, uid):
    """A profile of no one answered 200 with nothing, as a known user's without beliefs does: an agent could not tell
    a new user (or a mistyped id) from one it talked to. `known` tells them apart, and a 200 keeps a new user's
    memory page opening."""
    with MnemeClient(stack.api_url) as mneme:
        nobody = mneme.profile(f"new{uid}")
        assert (nobody.known, nobody.beliefs, nobody.open_reviews) == (False, [], [])
        mneme.recall(user_id=f"new{uid}", query="我几岁？")
        assert mneme.profile(f"new{uid}").known is False  # reading them (twice now) stores nothing of theirs

        said = mneme.remember(user_id=f"said{uid}", session_id=f"s{uid}", message_id="m1", content="好的")
        assert mneme.profile(f"said{uid}").known is True  # one message in working memory, no belief
        mneme.consent(f"asked{uid}", long_term=False)
        assert mneme.profile(f"asked{uid}").known is True  # their consent (a pause) is stored
        mneme.wait([said.job_id])
        assert mneme.erase(f"said{uid}").complete
        assert mneme.profile(f"said{uid}").known is False  # erased: nothing of them is left


def test_the_async_client_remembers_and_recalls_concurrently(stack, uid):
    async def run() -> set[tuple[str, str]]:
        async with AsyncMnemeClient(stack.api_url) as mneme:
            texts = ["I'm 15", "我喜欢用动画学物理", "I live in Berlin"]
            jobs = await asyncio.gather(*(mneme.remember(user_id=f"a{uid}", session_id=f"s{uid}", message_id=f"m{i}",
                                                         content=text) for i, text in enumerate(texts)))
            await mneme.wait([j.job_id for j in jobs])
            result = await mneme.recall(user_id=f"a{uid}", query="where do I live and how old am I?")
            return {(f.relation, f.object) for f in result.facts}

    assert {("age", "15"), ("location", "Berlin"), ("likes", "用动画学物理")} <= asyncio.run(run())


class _Busy(http.server.BaseHTTPRequestHandler):
    """Answers what ``answers`` says, in turn, then the purposes: a busy API, on cue."""

    answers: list[tuple[int, dict[str, str]]] = []
    seen: list[float] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.seen.append(time.monotonic())
        status, headers = self.answers.pop(0) if self.answers else (200, {})
        body = json.dumps({"error": "busy", "message": "try again"} if status >= 400 else
                          {"purposes": ["support"]}).encode()
        self.send_response(status)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def busy_api():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Busy.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_429_and_503_are_retried_honouring_retry_after_then_answered(busy_api):
    _Busy.answers[:] = [(503, {}), (429, {"Retry-After": "1"})]
    with MnemeClient(busy_api, retries=Retries(attempts=3, backoff_s=0.05)) as mneme:
        assert mneme.purposes() == ["support"]
    assert len(_Busy.seen) == 3 and _Busy.seen[2] - _Busy.seen[1] >= 0.95  # waited what Retry-After said


def test_retries_give_up_with_the_last_error_and_async_retries_alike(busy_api):
    _Busy.answers[:] = [(503, {})] * 5
    with MnemeClient(busy_api, retries=Retries(attempts=2, backoff_s=0.01)) as mneme, pytest.raises(Unavailable):
        mneme.purposes()
    assert len(_Busy.seen) == 3  # the first try and two retries
    _Busy.answers[:] = [(503, {"Retry-After": "0"})]

    async def run() -> list[str]:
        async with AsyncMnemeClient(busy_api, retries=Retries(attempts=1)) as mneme:
            return await mneme.purposes()

    assert asyncio.run(run()) == ["support"]
