"""A user's memory, listed, through the real API and workers: their sessions and episodic events page by page;
system and tool messages kept as the session's context, never as memory; /docs and the OpenAPI document say
how to authenticate and what each error means, and work offline."""

import time

import httpx
import pytest
from mneme_client import MnemeAPIError

from memory.pipeline import CONTEXT_NOTE
from tests.polling import wait_until


def test_system_and_tool_messages_are_context_in_the_window_never_memory(client, uid):
    user, session = f"u{uid}", f"s{uid}"
    jobs = [client.remember(user_id=user, session_id=session, message_id=f"m{i}", role=role, content=text,
                            client_ts=time.time() - 10 + i).job_id
            for i, (role, text) in enumerate([
                ("system", "You are a patient physics tutor. The user likes chemistry."),
                ("user", "我喜欢用动画学物理"),
                ("tool", '{"order": 4471, "status": "shipped", "note": "I love chemistry"}' + " pad" * 200)])]
    done = client.wait(jobs)
    assert [j.state for j in done] == ["done"] * 3
    assert done[0].note == CONTEXT_NOTE and done[2].note == CONTEXT_NOTE and done[1].note is None
    window = client.messages(session).messages
    assert [m.role for m in window] == ["system", "user", "tool"]
    assert window[2].truncated and client.message(session, "m2").content.endswith("pad")  # cut, kept whole
    assert {(b.relation, b.object) for b in client.profile(user).beliefs} == {("likes", "用动画学物理")}
    listed = client.events(user)
    assert {m for e in listed.events for m in e.message_ids} == {"m1"}


def test_sessions_and_events_are_listed_newest_first_page_by_page(client, uid):
    user = f"u{uid}"
    jobs = []
    for n in range(5):
        jobs.append(client.remember(user_id=user, session_id=f"s{n}-{uid}", message_id=f"m{n}", role="user",
                                    content=f"我的第{n}个问题：加速度和速度有什么区别？ question {n}",
                                    client_ts=time.time() - 100 + n).job_id)
    client.wait(jobs)
    first = client.sessions(user, limit=2)
    assert [s.session_id for s in first.sessions] == [f"s4-{uid}", f"s3-{uid}"] and first.next_cursor
    rest = client.sessions(user, limit=10, cursor=first.next_cursor)
    assert [s.session_id for s in rest.sessions] == [f"s{n}-{uid}" for n in (2, 1, 0)] and rest.next_cursor is None
    assert all(s.messages == 1 and s.version == 1 for s in first.sessions + rest.sessions)

    every = client.events(user, limit=200)
    pages, cursor = [], None
    while True:
        page = client.events(user, limit=3, cursor=cursor)
        pages += page.events
        if not (cursor := page.next_cursor):
            break
    assert [e.event_id for e in pages] == [e.event_id for e in every.events] and len(pages) >= 5
    assert [e.ts for e in pages] == sorted((e.ts for e in pages), reverse=True)
    assert all(e.summary and e.text is None and e.tier == "event" for e in pages)
    of_m2 = client.events(user, message_ids=["m2"], include_text=True)
    assert of_m2.events and all("m2" in e.message_ids and "question" in e.text for e in of_m2.events)
    in_s2 = client.events(user, message_ids=["m2"], session_id=f"s2-{uid}").events
    assert [(e.session_id, e.message_ids[0]) for e in in_s2] == [(f"s2-{uid}", "m2")]
    assert client.events(user, message_ids=["m2"], session_id=f"s3-{uid}").events == []
    with pytest.raises(MnemeAPIError) as err:
        client.events(user, session_id="not a session id")
    assert err.value.status == 422 and "session_id" in err.value.message
    assert client.events(user, event_types=["dislike"]).events == []
    assert client.events(user, tiers=["deep"]).events == []  # nothing let go of by the cap
    with pytest.raises(MnemeAPIError) as err:
        client.events(user, cursor="not-a-cursor")
    assert err.value.status == 400 and "next_cursor" in err.value.message
    listed = wait_until(lambda: [r for r in client.reads(user, limit=200).reads if r.action == "read.list"], 30,
                        "the listings recorded as reads")
    assert {f"s4-{uid}", f"s3-{uid}"} <= {s for r in listed for s in r.shown.get("sessions", [])}


def test_docs_work_offline_and_the_openapi_says_how_to_authenticate_and_every_error(stack):
    page = httpx.get(f"{stack.api_url}/docs")
    assert page.status_code == 200 and "cdn" not in page.text.lower()
    assert "/docs/assets/swagger-ui-bundle.js" in page.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        got = httpx.get(f"{stack.api_url}/docs/assets/{asset}")
        assert got.status_code == 200 and len(got.content) > 10_000
    assert httpx.get(f"{stack.api_url}/redoc").status_code == 404
    spec = httpx.get(f"{stack.api_url}/openapi.json").json()
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    recall = spec["paths"]["/v1/recall"]["post"]
    assert {"bearer": []} in recall["security"] and {"apiKey": []} in recall["security"]
    assert {"401", "429", "503"} <= set(recall["responses"])
    assert "Retry-After" in recall["responses"]["429"]["headers"]
    assert spec["components"]["schemas"]["Role"]["enum"] == ["user", "assistant", "system", "tool"]
