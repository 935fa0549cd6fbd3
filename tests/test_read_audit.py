"""Read audit on a stack that requires API keys: every recall, profile read and export is recorded — which
memories were shown to which key and agent, and why — in the hash-chained trail and the read log, without
content; a user's "who saw what about me" answers from it, only within the tenant; erasure and export cover it."""

import json
import os
import signal
import time

import httpx
import pytest
from mneme_client import MnemeAPIError, MnemeClient

from memory.audit import verify
from memory.mneme import Mneme
from memory.state import keys
from memory.userhash import user_hash
from tests.polling import wait_until
from tests.stacks import audit_records, master_key, restarted, running_stack
from workers.celery_app import create_celery

REDRIVE_AFTER_S = 2  # how long a record is held before the redrive re-sends it (beat is off here)


@pytest.fixture(scope="module")
def rstack(tmp_path_factory):
    with running_stack(tmp_path_factory, "reads", MNEME_AUTH_REQUIRED="true", MNEME_MASTER_KEY=master_key(),
                       MNEME_CONSENT_REQUIRED="false",
                       MNEME_REDRIVE_AFTER_S=str(REDRIVE_AFTER_S)) as s:
        yield s


@pytest.fixture(scope="module")
def rrt(rstack) -> Mneme:
    return Mneme(rstack.settings)


def key_for(rstack, rrt, tenant: str, agent: str | None = None) -> tuple[MnemeClient, str]:
    key_id, secret = rrt.state.api_keys.create_key(tenant, name=f"{tenant} agent")
    return MnemeClient(rstack.api_url, api_key=secret, agent=agent), key_id


def remembered(client: MnemeClient, user: str, session: str, texts: list[str]) -> None:
    jobs = [client.remember(user_id=user, session_id=session, message_id=f"m{i}", role="user", content=text).job_id
            for i, text in enumerate(texts)]
    assert {j.state for j in client.wait(jobs)} == {"done"}


def reads_of(client: MnemeClient, user: str, count: int) -> list:
    """The user's reads once ``count`` are written (a worker writes them off the request's path)."""
    return wait_until(lambda: len(r := client.reads(user).reads) >= count and r, 30, f"{count} reads recorded")


TEXTS = ["我叫王小明，我今年15岁，我喜欢化学", "I play the piano every Sunday with my sister Lily",
         "我在北京上高中，数学有点难"]


def test_a_recall_records_what_it_showed_to_which_key_and_agent_and_why_without_content(rstack, rrt, uid):
    tenant, user, session = f"school-{uid}", "student1", f"s-{uid}"
    agent, key_id = key_for(rstack, rrt, tenant, agent="tutor-bot")
    with agent:
        remembered(agent, user, session, TEXTS)
        query = "化学 and piano 老师问起"
        shown = agent.recall(user_id=user, query=query, session_id=session, k=5)
        assert shown.events and shown.facts and shown.working
        [read] = reads_of(agent, user, 1)
    assert (read.action, read.operator_id, read.agent, read.source, read.session_id) == (
        "read.recall", key_id, "tutor-bot", "api", session)
    assert read.shown["messages"] == [m.message_id for m in shown.working]
    assert [e["id"] for e in read.shown["events"]] == [e.event_id for e in shown.events]
    assert [e["why"] for e in read.shown["events"]] == [e.why for e in shown.events]  # the score parts
    assert [(b["id"], b["why"]) for b in read.shown["beliefs"]] == [(f.rel_id, f.why) for f in shown.facts]
    # the same record, by id, in the hash-chained trail, naming the user by hash only and holding no content
    [record] = [r for r in audit_records(rstack) if r["id"] == read.id]
    line = json.dumps(record, ensure_ascii=False)
    assert record["action"] == "read.recall" and record["shown"] == read.shown and user not in line
    for text in (query, "化学", "piano", "王小明", *TEXTS, *(e.summary for e in shown.events)):
        assert text not in line
    assert verify(rstack.data_dir / "audit.jsonl").ok


def test_profile_reads_and_exports_are_recorded_newest_first_and_page(rstack, rrt, uid):
    tenant, user = f"clinic-{uid}", "patient7"
    support, key_id = key_for(rstack, rrt, tenant, agent="support-desk")
    with support:
        remembered(support, user, f"s-{uid}", TEXTS)
        profile = support.profile(user)
        assert profile.beliefs
        document = support.export(user)
        assert document["user_id"] == user and document["sessions"]
        export, seen = reads_of(support, user, 2)
        older = support.reads(user, limit=1, before=export.ts).reads
    assert [r.action for r in (export, seen)] == ["read.export", "read.profile"] and export.ts >= seen.ts
    assert [(b["id"], b["why"]) for b in seen.shown["beliefs"]] == [(b.rel_id, "profile") for b in profile.beliefs]
    assert export.shown["why"] == "export" and export.shown["stores"]["sessions"] == 1
    assert export.shown["stores"]["graph_relations"] >= len(profile.beliefs)
    assert export.operator_id == seen.operator_id == key_id
    assert [r.id for r in older] == [seen.id]  # the next page: older than the first


def test_who_saw_what_answers_only_within_the_callers_tenant(rstack, rrt, uid):
    a, _ = key_for(rstack, rrt, f"a-{uid}")
    b, _ = key_for(rstack, rrt, f"b-{uid}")
    with a, b:
        remembered(a, "same-id", f"s-{uid}", TEXTS[:1])
        a.recall(user_id="same-id", query="化学")
        reads_of(a, "same-id", 1)
        assert b.reads("same-id").reads == []  # the same user id in another tenant is another user


def test_erasure_and_export_cover_the_read_log(rstack, rrt, uid):
    tenant, user = f"bank-{uid}", "client3"
    c, _ = key_for(rstack, rrt, tenant)
    with c:
        remembered(c, user, f"s-{uid}", TEXTS[:2])
        c.recall(user_id=user, query="piano")
        c.profile(user)
        reads_of(c, user, 2)
        assert [r["action"] for r in c.export(user)["reads"]] == ["read.profile", "read.recall"]  # held before it
        reads_of(c, user, 3)  # the export's own
        receipt = c.erase(user)
        assert receipt.complete and receipt.removed["reads"] == 3  # the export's own record too
        assert receipt.remaining["reads"] == 0 and c.reads(user).reads == []


def test_an_agent_name_that_is_not_an_id_is_refused_and_nothing_is_read(rstack, rrt, uid):
    c, _ = key_for(rstack, rrt, f"odd-{uid}")
    with c:
        r = httpx.post(f"{rstack.api_url}/v1/recall", json={"user_id": "u1", "query": "x"},
                       headers={**c._http.headers, "X-Mneme-Agent": "tutor bot/1"})
        assert r.status_code == 400 and "X-Mneme-Agent" in r.json()["message"]
        with pytest.raises(MnemeAPIError) as err:
            c.reads("u1", limit=0)
        assert err.value.status == 422 and c.reads("u1").reads == []


def test_a_read_whose_batch_died_with_its_api_process_is_written_by_the_redrive(rstack, rrt, uid):
    """The request holds its read's record in the outbox before it answers; the batch that would send it to
    a worker lives in the API process. Killed with -9 before sending it, the record is still held, and the
    redrive (beat's, sent here) writes it."""
    tenant, user = f"kill-{uid}", "learner"
    c, key_id = key_for(rstack, rrt, tenant, agent="night-tutor")
    app = create_celery(rstack.settings, with_tasks=False)
    with c:
        remembered(c, user, f"s-{uid}", TEXTS[:1])
        with restarted(rstack, "api", MNEME_EXTRACT_SEND_INTERVAL_S="600"):  # it holds its batches 10 min
            api = rstack.procs["api"]
            shown = c.recall(user_id=user, query="化学")
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)
            held_at = time.monotonic()
        assert rrt.reads.count(tenant, user) == 0  # never sent to a worker
        wait_until(lambda: time.monotonic() - held_at > REDRIVE_AFTER_S, 10, "the record held long enough")
        app.send_task("memory.redrive", kwargs={"limit": 1000})  # what beat runs
        [read] = reads_of(c, user, 1)
    app.close()
    assert (read.action, read.operator_id, read.agent) == ("read.recall", key_id, "night-tutor")
    assert [e["id"] for e in read.shown["events"]] == [e.event_id for e in shown.events]


def test_a_read_still_on_its_way_when_the_user_is_erased_is_not_kept(rstack, rrt, uid):
    """A read's record travels after the read; an erasure that comes first is not undone by its arrival."""
    tenant, user = f"late-{uid}", "leaver"
    c, _ = key_for(rstack, rrt, tenant)
    who = user_hash(rrt.user_hash_key, tenant, user)

    def held() -> list[str]:  # this user's read records in the outbox
        return [record_id for record_id, raw in rrt.state.client.hgetall(keys.AUDIT_OUTBOX).items()
                if json.loads(raw)["user"] == who and json.loads(raw)["action"].startswith("read.")]

    with c:
        remembered(c, user, f"s-{uid}", TEXTS[:1])
        with restarted(rstack, "api", MNEME_EXTRACT_SEND_INTERVAL_S="600"):  # it holds its batches 10 min
            c.recall(user_id=user, query="化学")
            assert held()  # held, its batch not sent
            receipt = c.erase(user)
            assert receipt.complete and receipt.removed["reads"] == 0
        # the API stopped gracefully and sent its batch on the way out: the worker writes it to the trail
        wait_until(lambda: not held(), 30, "the late read record written")
        assert rrt.reads.count(tenant, user) == 0 and c.reads(user).reads == []
