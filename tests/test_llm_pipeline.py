"""The LLM stage inside the real pipeline: its own stack with the LLM endpoint played by a local STUB
(no LLM can run here). Messages the rules cannot type go through the ``llm`` queue; whatever the stub
answers, the message is never lost."""

import time

import pytest
from mneme_client import MnemeClient

from memory.mneme import Mneme
from memory.state import keys
from tests.llm_stub import StubLLM
from tests.stacks import restarted, running_stack


@pytest.fixture(scope="module")
def stub():
    with StubLLM() as s:
        yield s


@pytest.fixture(scope="module")
def llm_stack(tmp_path_factory, stub):
    with running_stack(tmp_path_factory, "llm-stack", MNEME_LLM_BASE_URL=stub.base_url, MNEME_LLM_TIMEOUT_S="5",
                       MNEME_CONSENT_REQUIRED="false") as s:
        yield s


@pytest.fixture
def llm_client(llm_stack):
    with MnemeClient(llm_stack.api_url) as c:
        yield c


def send(client, uid, text, i=0):
    accepted = client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role="user",
                               content=text)
    [job] = client.wait([accepted.job_id], timeout=60)
    return job


def test_llm_types_what_the_rules_could_not(llm_client, stub, uid):
    stub.reply_json({"events": [{"event_type": "goal", "keywords": ["清华", "物理系"], "summary": "想考清华物理系"}],
                     "facts": [{"relation": "likes", "object": "物理", "confidence": 0.6}]})
    job = send(llm_client, uid, "明年夏天的目标是清华物理系")
    assert job.state == "done" and job.llm == "ok"
    result = llm_client.recall(user_id=f"u{uid}", query="我的目标", k=3)
    assert result.events[0].event_type == "goal" and result.events[0].summary == "想考清华物理系"
    assert [(f.relation, f.object, f.source) for f in result.facts] == [("likes", "物理", "llm")]


@pytest.mark.parametrize(("behave", "reason"), [
    (lambda s: s.reply_text("sorry, I cannot do JSON"), "malformed"),
    (lambda s: s.reply_json({"events": [{"event_type": "gossip", "keywords": [], "summary": "x"}]}), "schema"),
    (lambda s: s.hang(10), "timeout"),
    (lambda s: s.fail(500), "http_500"),
])
def test_llm_failure_falls_back_to_the_rules_and_is_counted(llm_client, llm_stack, stub, uid, behave, reason):
    before = Mneme(llm_stack.settings).state.llm_usage.failures().get(reason, 0)
    behave(stub)
    job = send(llm_client, uid, "The meeting moved to Thursday afternoon")
    assert job.state == "done" and job.llm == reason
    [hit] = llm_client.recall(user_id=f"u{uid}", query="meeting Thursday", k=1).events
    assert hit.event_type == "statement" and hit.message_ids == ["m0"]  # the rules' event: nothing lost
    assert Mneme(llm_stack.settings).state.llm_usage.failures()[reason] == before + 1


def test_typed_messages_skip_the_llm(llm_client, stub, uid):
    calls = len(stub.requests)
    job = send(llm_client, uid, "我今年16岁")
    assert job.llm is None and len(stub.requests) == calls


def test_a_tenant_past_its_llm_calls_a_minute_keeps_the_rules_and_loses_nothing(llm_stack, stub, uid):
    """One tenant may queue MNEME_LLM_TENANT_CALLS_PER_MIN LLM calls a minute (1 here): beyond, its messages
    keep the rules' extraction, so its flood cannot fill the LLM queue ahead of the other tenants'. (Three
    messages span at most two minutes: at most two calls.)"""
    stub.reply_json({"events": [{"event_type": "plan", "keywords": ["周四"], "summary": "会议改到周四"}], "facts": []})
    with restarted(llm_stack, "worker-pipeline", MNEME_LLM_TENANT_CALLS_PER_MIN="1"), \
            MnemeClient(llm_stack.api_url) as client:
        minute = int(time.time() // 60)  # the other tests' calls this minute were the same tenant's
        Mneme(llm_stack.settings).state.client.delete(*(keys.llm_calls("default", m) for m in (minute, minute + 1)))
        texts = ["The meeting moved to Thursday afternoon", "会议改到周四下午了", "Thursday works better for the team"]
        jobs = [send(client, uid, text, i) for i, text in enumerate(texts)]
        outcomes = [job.llm for job in jobs]
        assert {job.state for job in jobs} == {"done"} and 1 <= outcomes.count("ok") <= 2, outcomes
        assert set(outcomes) == {"ok", "tenant_rate"}
        hits = client.recall(user_id=f"u{uid}", query="meeting Thursday 周四", k=5).events
        assert {m for hit in hits for m in hit.message_ids} == {"m0", "m1", "m2"}  # every message remembered
