"""The LLM stage inside the real pipeline: its own stack with the LLM endpoint played by a local STUB
(no LLM can run here). Messages the rules cannot type go through the ``llm`` queue; whatever the stub
answers, the message is never lost."""

import pytest

from memory.mneme import Mneme
from tests.llm_stub import StubLLM
from tests.stacks import running_stack
from workers.client import MnemeClient


@pytest.fixture(scope="module")
def stub():
    with StubLLM() as s:
        yield s


@pytest.fixture(scope="module")
def llm_stack(tmp_path_factory, stub):
    with running_stack(tmp_path_factory, "llm-stack", MNEME_LLM_BASE_URL=stub.base_url, MNEME_LLM_TIMEOUT_S="1",
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
    (lambda s: s.hang(3), "timeout"),
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
