"""The LLM stage against a real model: gemma-3-270m (4 bits, from PyPI) served by llama-cpp-python's
OpenAI-compatible server (``tests/llama_server.py``), its answers constrained by the vocabulary's JSON schema.
The model is small and often wrong ("我叫李伟，今年17岁…" → twelve ``age: aage``): these tests hold what the stage
guarantees whatever a model says — the answer parses into the closed sets, only what the message itself states
of its writer is kept, a call keeps to its time and token budget, a message is never lost — and, through the
real API and workers, that a message the rules could not type comes out typed by the model."""

from __future__ import annotations

import html
import time

import pytest
import redis
from mneme_client import MnemeClient

from memory import extraction
from memory.llm import LLMExtractor
from memory.models import EventType, FactSource, Message, Role
from memory.settings import Settings
from memory.state.llm_usage import LLMUsage
from memory.vocabulary import load_vocabulary
from tests.llama_server import MODEL, LlamaServer
from tests.stacks import running_stack

#: a user's turns: stated facts, a question about themselves, a nickname others use, chatter the rules can't type
TURNS = ["我叫李伟，今年17岁，喜欢物理。", "我住在哪里？",
         "They call me Carrot Top, and I really don't like that name.", "周末去了趟西湖，断桥那边人特别多"]


@pytest.fixture(scope="module")
def llama_server():
    with LlamaServer() as server:
        yield server


@pytest.fixture
def usage(valkey_url):
    client = redis.Redis.from_url(valkey_url, decode_responses=True)
    yield LLMUsage(client)
    client.close()


def settings(server: LlamaServer, **overrides: object) -> Settings:
    values: dict[str, object] = dict(llm_base_url=server.base_url, llm_model=MODEL, llm_response_format="llama_cpp",
                                     llm_timeout_s=120.0, llm_daily_token_budget=1_000_000)
    return Settings(**(values | overrides))


def message(text: str, i: int = 0) -> Message:
    return Message(tenant=f"real{i}", user_id="u", session_id="s", message_id=f"m{i}", role=Role.user,
                   content=html.escape(text, quote=False), client_ts=time.time())


def test_the_models_answer_parses_into_the_closed_sets_and_only_what_the_message_states_is_kept(llama_server, usage):
    names = set(load_vocabulary().names)
    with LLMExtractor(settings(llama_server), usage) as llm:
        for i, text in enumerate(TURNS):
            said = message(text, i)
            result, outcome = llm.extract(said, extraction.extract(said))
            assert outcome.used_llm and outcome.reason == "ok", (text, outcome)  # the schema held the model to JSON
            assert outcome.tokens > 0 and result.events
            assert all(isinstance(e.event_type, EventType) for e in result.events)
            for fact in result.facts:
                assert fact.relation in names
                assert html.unescape(fact.object).casefold() in text.casefold(), (text, fact)  # grounded
            if text.endswith("？"):
                assert result.facts == []  # a question about oneself states nothing
            if "Carrot Top" in text:
                assert not any(f.relation == "name" for f in result.facts)  # other people's words
            if text.startswith("我叫李伟"):
                ages = {f.object for f in result.facts if f.relation == "age"}
                assert ages == {"17"} and ("name", "李伟") in {(f.relation, f.object) for f in result.facts}
            assert not any(f.source is FactSource.llm and f.relation == "age" and f.object != "17"
                           for f in result.facts)


def test_a_call_past_its_time_budget_leaves_the_rules_result(llama_server, usage):
    said = message(TURNS[0] * 20)
    rules = extraction.extract(said)
    with LLMExtractor(settings(llama_server, llm_timeout_s=0.2), usage) as llm:
        result, outcome = llm.extract(said, rules)
    assert outcome.reason == "timeout" and not outcome.used_llm and result is rules


def test_an_answer_past_its_token_budget_is_cut_and_leaves_the_rules_result(llama_server, usage):
    said = message(TURNS[3])
    rules = extraction.extract(said)
    with LLMExtractor(settings(llama_server, llm_max_tokens=16), usage) as llm:
        result, outcome = llm.extract(said, rules)
    assert outcome.reason in ("malformed", "schema") and result is rules  # 16 tokens hold no whole answer
    assert outcome.tokens <= 16 + len(llm.prompt) + len(said.content)  # what was spent: the prompt and 16 more


@pytest.fixture(scope="module")
def real_llm_stack(tmp_path_factory, llama_server):
    with running_stack(tmp_path_factory, "real-llm", MNEME_LLM_BASE_URL=llama_server.base_url,
                       MNEME_LLM_MODEL=MODEL, MNEME_LLM_RESPONSE_FORMAT="llama_cpp", MNEME_LLM_TIMEOUT_S="120",
                       MNEME_CONSENT_REQUIRED="false") as stack:
        yield stack


def test_through_the_pipeline_the_model_types_what_the_rules_could_not(real_llm_stack, uid):
    with MnemeClient(real_llm_stack.api_url) as client:
        jobs = [client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role="user",
                                content=text).job_id for i, text in enumerate(TURNS[1:])]
        done = client.wait(jobs, timeout=240)
        assert [job.state for job in done] == ["done"] * 3
        untyped = done[-1]
        assert untyped.llm in ("ok", "malformed", "schema")  # the model was asked; whatever it said, nothing lost
        hits = client.recall(user_id=f"u{uid}", query="西湖 断桥", k=3).events
        assert hits and hits[0].message_ids == ["m2"]
        assert {h.event_type for h in hits} <= {t.value for t in EventType}
        beliefs = client.profile(f"u{uid}").beliefs
        assert not any(b.relation in ("location", "name") for b in beliefs)  # not from a question or a nickname
