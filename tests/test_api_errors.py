"""Bad input gets a 4xx that says what to fix, and loses nothing that was accepted before."""

import httpx
import pytest


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
])
def test_invalid_message_is_refused_with_a_reason(stack, uid, change, says):
    r = httpx.post(stack.api_url + "/v1/messages", json=good(uid, **change))
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "invalid_request" and says in body["message"]


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
