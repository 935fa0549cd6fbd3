"""Bad input gets a 4xx that says what to fix, and loses nothing that was accepted before."""

import http.client
import json
import time
from urllib.parse import quote, urlsplit

import httpx
import pytest

SECRET = "我的秘密日记 my secret diary"  # never in an error answer or a log


def good(uid, **over):
    body = {"user_id": f"u{uid}", "session_id": f"s{uid}", "message_id": "m1", "role": "user",
            "content": "我喜欢化学", "client_ts": 1_700_000_000}
    body.update(over)
    return body


@pytest.mark.parametrize(("change", "says"), [
    ({"role": "robot"}, "role"),
    ({"content": ""}, "content"),
    ({"user_id": "bad id with spaces"}, "user_id"),
    ({"message_id": "x" * 300}, "message_id"),
    ({"client_ts": "yesterday"}, "client_ts"),
    ({"client_ts": -5}, "client_ts"),
    ({"session_id": None}, "session_id"),
    ({"client_ts": True}, "client_ts"),  # not 1.0, i.e. 1970
    ({"client_ts": False}, "client_ts"),
    ({"client_ts": "9999-12-31T23:59:59"}, "client_ts"),  # was read as milliseconds: 1978
    ({"client_ts": 946_684_799}, "client_ts"),  # 1999-12-31T23:59:59Z
    ({"client_ts": 946_684_799_000}, "client_ts"),  # the same, in milliseconds
    ({"client_ts": "1999-12-31T23:59:59"}, "client_ts"),
    ({"client_ts": time.time() + 2 * 86_400}, "client_ts"),  # two days ahead: not clock skew
])
def test_invalid_message_is_refused_with_a_reason(stack, uid, change, says):
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, **{"content": SECRET, **change}))
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "invalid_request" and says in body["message"]
    assert SECRET not in r.text  # the user's text is not echoed back, not even in the details


@pytest.mark.parametrize("ts", [946_684_800, 946_684_800_000, "2000-01-01T00:00:00Z", "2000-01-01T08:00:00+08:00"])
def test_client_ts_from_2000_on_in_seconds_milliseconds_or_iso_is_accepted(stack, uid, ts):
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, client_ts=ts))
    assert r.status_code == 202 and r.json()["client_ts"] == 946_684_800, r.text


def test_client_ts_up_to_a_day_ahead_is_clamped_to_the_clock_skew(stack, uid):
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, client_ts=time.time() + 80_000))
    assert r.status_code == 202 and r.json()["client_ts"] <= time.time() + 301, r.text  # MNEME_MAX_CLOCK_SKEW_S


def _logs(stack) -> str:
    return "".join(p.read_text(errors="replace") for p in stack.logs.glob("*.log"))


@pytest.mark.parametrize("bad", [
    b'"client_ts": NaN', b'"client_ts": Infinity', b'"client_ts": -Infinity', b'"client_ts": 1e400',
    b'"client_ts": 1700000000, "k": [1, {"x": 1e999}]',
    b'"client_ts": 1700000000, "device_id": "d\\ud800"',  # an escaped lone surrogate
    '"client_ts": 1700000000, "device_id": "d\udfff"'.encode("utf-8", "surrogatepass"),  # a raw one
], ids=["nan", "infinity", "minus-infinity", "1e400", "nested-1e999", "escaped-surrogate", "raw-surrogate"])
def test_json_python_reads_but_json_has_not_is_422_and_the_connection_lives_on(stack, uid, bad):
    """NaN, Infinity, a number that overflows and a lone surrogate: 422 saying what to fix, the next request on
    the same connection is answered, and the body's text is in no answer and no log."""
    secret = f"{SECRET} {uid}"
    body = (b'{"user_id": "u%s", "session_id": "s%s", "message_id": "m1", "role": "user", "content": %s, %s}'
            % (uid.encode(), uid.encode(), json.dumps(secret).encode(), bad))
    url = urlsplit(stack.api_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json"})
        answer = conn.getresponse()
        text = answer.read().decode()
        assert answer.status == 422, text
        sock = conn.sock
        assert sock is not None and not answer.will_close  # the server keeps the connection open
        error = json.loads(text)
        assert error["error"] == "invalid_request" and "not valid JSON" in error["message"]
        assert any(word in error["message"] for word in ("finite number", "surrogate")), error
        assert secret not in text and "秘密" not in text
        conn.request("GET", f"/v1/sessions/s{uid}/messages")  # the next request, on the same connection
        after = conn.getresponse()
        after.read()
        assert conn.sock is sock and after.status == 404  # answered (nothing of the bad request was stored)
    finally:
        conn.close()
    assert secret not in _logs(stack) and uid not in _logs(stack)


def test_validation_errors_never_echo_the_users_text(stack, uid):
    for body in [{"content": SECRET}, {**good(uid, content=SECRET), "role": None},
                 {**good(uid, content=SECRET), "message_id": "坏的 id"}]:
        r = httpx.post(stack.api_url + "/v1/messages", json=body)
        assert r.status_code == 422 and r.json()["message"], r.text
        assert SECRET not in r.text
    r = httpx.put(f"{stack.api_url}/v1/users/u{uid}/beliefs", json={"relation": "likes", "object": SECRET * 5})
    assert r.status_code == 422 and "object" in r.json()["message"] and SECRET not in r.text


def test_text_that_looks_sealed_is_kept_as_written(stack, client, uid):
    """``enc:v1:`` was the sealed-text prefix: a message starting with it was shown as "[erased]" and reached
    long-term memory empty. For a child (whose window is sealed) too, what was written comes back."""
    adult, child = f"u{uid}", f"kid{uid}"
    httpx.put(f"{stack.api_url}/v1/users/{child}/child", json={"child": True}).raise_for_status()
    texts = {adult: "enc:v1:我的笔记 my notes on 光合作用", child: "enc:v1:aGVsbG8= 孩子的笔记 kid's notes"}
    jobs = [client.remember(user_id=user, session_id=f"s-{user}", message_id="m1", role="user", content=text).job_id
            for user, text in texts.items()]
    assert all(j.state == "done" for j in client.wait(jobs))
    for user, text in texts.items():
        assert [m.content for m in client.messages(f"s-{user}").messages] == [text]
        assert client.message(f"s-{user}", "m1").content == text
    events = client.recall(user_id=adult, query="光合作用", include_text=True).events
    assert [e.text for e in events] == [texts[adult]]


def test_working_memory_drops_bidi_overrides_and_control_characters(stack, client, uid):
    client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id="m1", role="user",
                    content="我喜欢\u202e学化学\u202c，I like \u2066physics\u2069\x85 😀\x00")
    assert [m.content for m in client.messages(f"s{uid}").messages] == ["我喜欢学化学，I like physics 😀"]
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, message_id="m2", content="\u202e\u2066\x00\x9f"))
    assert r.status_code == 400 and "empty after cleaning" in r.json()["message"]


def test_belief_objects_are_cleaned_like_every_text(stack, client, uid):
    user = f"u{uid}"
    put = httpx.put(f"{stack.api_url}/v1/users/{user}/beliefs",
                    json={"relation": "likes", "object": "<script>alert(1)</script>\x00\u202e数学 math"})
    assert put.status_code == 200, put.text
    assert put.json()["object"] == "&lt;script&gt;alert(1)&lt;/script&gt;数学 math"
    empty = httpx.put(f"{stack.api_url}/v1/users/{user}/beliefs", json={"relation": "likes", "object": "\u202e\x00"})
    assert empty.status_code == 422 and "object" in empty.json()["message"], empty.text
    jobs = [client.remember(user_id=user, session_id=f"s{uid}", message_id=f"m{i}", role="user", content=text).job_id
            for i, text in enumerate(["我讨厌背公式\u202e", "I want to learn <i>Python</i>\u2066"])]
    assert all(j.state == "done" for j in client.wait(jobs))
    held = {(b.relation, b.object) for b in client.profile(user).beliefs}
    assert held == {("likes", "&lt;script&gt;alert(1)&lt;/script&gt;数学 math"),
                    ("dislikes", "背公式"), ("goal", "learn &lt;i&gt;Python&lt;/i&gt;")}


@pytest.mark.parametrize("field", ["user_id", "event_id", "operator_id"])
def test_feedback_ids_are_held_to_the_id_pattern_and_never_echoed(stack, uid, field):
    body = {"user_id": f"u{uid}", "event_id": "e1", "useful": True, "operator_id": "agent", field: "x" * 1_000_000}
    r = httpx.post(stack.api_url + "/v1/feedback", json=body)
    assert r.status_code == 422 and r.json()["message"].startswith(f"{field}: must be an id"), r.text[:300]
    assert len(r.content) < 2_000  # what was sent is not sent back


@pytest.mark.parametrize(("method", "path", "field"), [
    ("GET", "/v1/sessions/{bad}/messages", "path.session_id"),
    ("GET", "/v1/sessions/s1/messages/{bad}", "path.message_id"),
    ("GET", "/v1/users/{bad}/profile", "path.user_id"),
    ("PUT", "/v1/users/{bad}/beliefs", "path.user_id"),
    ("DELETE", "/v1/users/u1/beliefs/{bad}", "path.rel_id"),
    ("POST", "/v1/users/u1/reviews/{bad}/resolve", "path.review_id"),
    ("PUT", "/v1/users/{bad}/consent", "path.user_id"),
    ("DELETE", "/v1/users/{bad}", "path.user_id"),
    ("GET", "/v1/jobs/{bad}", "path.job_id"),
    ("DELETE", "/v1/users/u1?operator_id={bad}", "query.operator_id"),
])
@pytest.mark.parametrize("bad", ["用户一", "bad id", "x'}) DETACH DELETE n --", "-leading-dash", "x" * 129])
def test_ids_in_paths_are_held_to_the_id_pattern(stack, method, path, field, bad):
    body = {"relation": "likes", "object": "化学", "long_term": True, "keep": []}
    r = httpx.request(method, stack.api_url + path.format(bad=quote(bad, safe="")), json=body)
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith(f"{field}: must be an id: 1-128 characters"), r.text


def test_whitespace_only_and_oversized_content_are_400(stack, uid):
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, content=" \t\n "))
    assert r.status_code == 400 and "empty" in r.json()["message"]
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, content="长" * 20_001))
    assert r.status_code == 400 and "20000" in r.json()["message"]


def test_not_json_is_422(stack):
    r = httpx.post(stack.api_url + "/v1/messages", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["message"]


def test_rollback_needs_exactly_one_target(stack, uid):
    httpx.post(stack.api_url + "/v1/messages", json=good(uid)).raise_for_status()
    for body in [{}, {"to_version": 1, "undo_last": True}]:
        r = httpx.post(f"{stack.api_url}/v1/sessions/s{uid}/rollback", json=body)
        assert r.status_code == 422 and "exactly one" in r.json()["message"]
    r = httpx.post(f"{stack.api_url}/v1/sessions/s{uid}/rollback", json={"to_version": 99})
    assert r.status_code == 404 and "0..1" in r.json()["message"]


def test_unknown_things_are_404(stack, uid):
    assert httpx.get(f"{stack.api_url}/v1/sessions/nope{uid}/messages").status_code == 404
    assert httpx.get(f"{stack.api_url}/v1/jobs/nope").status_code == 404
    r = httpx.post(stack.api_url + "/v1/recall", json={"user_id": "u", "query": "x", "event_types": ["gossip"]})
    assert r.status_code == 422 and "event_types" in r.json()["message"]


def test_bad_requests_lose_nothing_already_accepted(stack, uid):
    httpx.post(stack.api_url + "/v1/messages", json=good(uid)).raise_for_status()
    httpx.post(stack.api_url + "/v1/messages", json=good(uid, message_id="m2", role="robot"))
    httpx.post(stack.api_url + "/v1/messages", json=good(uid, message_id="m1", content="other"))  # 409
    r = httpx.get(f"{stack.api_url}/v1/sessions/s{uid}/messages").json()
    assert [m["content"] for m in r["messages"]] == ["我喜欢化学"]


def test_openapi_and_health(stack):
    assert "/v1/recall" in httpx.get(stack.api_url + "/openapi.json").json()["paths"]
    assert httpx.get(stack.api_url + "/docs").status_code == 200
    health = httpx.get(stack.api_url + "/healthz").json()
    assert health["status"] == "ok" and set(health["backends"]) >= {"redis", "episodic", "graph", "embedder"}
