"""Optional LLM extraction stage: one message → typed events + ``llm`` facts via an OpenAI-compatible chat API
(a local llama.cpp server, Ollama, vLLM, OpenAI, DeepSeek, Qwen…), the design's "规则引擎 + LLM 校验".

The rules (:mod:`memory.extraction`) always run first. The stage sees what they did not settle — a message
they could not type, or a claim of a rule family less sure than ``llm_check_below`` — and:
- types the message when the rules could not (its events, of the closed set);
- checks the rules' less sure claims: one the model does not also make (same relation, overlapping object) is
  vetoed;
- adds what the rules missed, each claim held to the rules' own measure whatever the model says
  (``memory.claims.grounded``): the object as the message writes it, in a clause of the user's own that is no
  question, condition or quote, a whole phrase and no pronoun, an age a number the message says; a
  single-valued relation given two values is ambiguous and dropped; duplicates collapse. Its confidence is
  ``llm_confidence``, the measured precision of the stage (``make bench-beliefs`` with ``--llm``), not the
  model's own.
The answer is constrained to the vocabulary's relations and the closed event types by a JSON schema where the
endpoint takes one (``llm_response_format``: ``json_schema`` for OpenAI, vLLM and Ollama; ``llama_cpp`` for
llama-cpp-python's server; ``json_object`` for endpoints that take no schema, DeepSeek and Qwen: the schema is
then only in the prompt and the guards above do the rest). Each call is held to ``llm_max_tokens`` of answer,
``llm_max_input_chars`` of message and ``llm_timeout_s``.

This stage never raises for an LLM problem and never loses a message: on a timeout, an unreachable endpoint,
an HTTP error, output that is not the expected JSON, or an exhausted daily token budget it returns the rules'
result unchanged, says why in an :class:`LLMOutcome` and counts the reason (``memory.state.llm_usage``).

Budget: each tenant may spend ``llm_daily_token_budget`` tokens per UTC day (``memory.state.llm_usage``, 2-day TTL);
0 disables the stage. The check happens before the call, so concurrent workers can overshoot by a call each.
Back-off, per tenant: a provider answering 429 or 503 to a tenant's call pauses that tenant's calls for what it
asked (``Retry-After``) or for twice the tenant's last pause (2 s, 4 s, … at most ``llm_backoff_max_s``); during
the pause its messages keep the rules' result (reason ``backoff``) without a call, and other tenants' calls go
on. A call that succeeds ends the tenant's back-off.
Redis errors are not LLM problems: they raise :class:`TransientError`, as everywhere else.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, Field, StringConstraints, ValidationError

from memory import ids, telemetry
from memory.claims import grounded
from memory.errors import ConfigurationError
from memory.models import Event, EventType, Extraction, Fact, FactSource, Message, RelationName, Role
from memory.settings import Settings
from memory.state.llm_usage import LLMUsage
from memory.text import cut, sha256, tokenize
from memory.vocabulary import Vocabulary, load_vocabulary

EVENT_CONFIDENCE = 0.6
MAX_FACTS = 4  # per message: the schema's bound on what a model may list (a small one lists junk to it)

_FENCE = re.compile(r"\A\s*```(?:json|JSON)?[ \t]*\n?(.*?)\n?\s*```\s*\Z", re.S)

def system_prompt(vocabulary: Vocabulary) -> str:
    """The instructions: the answer's shape, the closed event types, and the deployment's relations with what
    each means (``memory.vocabulary``), so the model's facts follow the vocabulary file."""
    relations = "\n".join(f"- {s.name}: {s.description or s.category}" for s in vocabulary.relations.values())
    return f"""你是一个记忆抽取器。You are a memory extractor for an agent that remembers its users.
读取一条对话消息，只输出一个 JSON 对象，不要任何解释或 markdown。
Read one conversation message and output ONE strict JSON object, nothing else:
{{"events": [{{"event_type": "<type>", "keywords": ["≤3 个关键词 / keywords"], "summary": "≤50 字 / chars"}}],
 "facts": [{{"relation": "<relation>", "object": "1-30 字 / chars", "confidence": 0.1-1.0}}]}}
允许的 event_type / allowed event types: {", ".join(t.value for t in EventType)}
允许的 relation / allowed relations (名称: 含义 / name: meaning):
{relations}
规则 / rules: 至少一个 event (at least one event); 只用上面的取值 (only the values above);
facts 只记录用户在这条消息里陈述的关于自己的事实 (facts: only what the user states about themselves in this message);
object 从消息原文中照抄 (copy the object from the message verbatim); 问句、假设、别人的话不算 (no facts from
questions, conditions or other people's words); 没有就给空列表 (none: "facts": []);
助手消息 facts 为空 (assistant message: "facts": []);
用消息的语言写 summary 和 keywords (write them in the message's language)."""


def answer_schema(vocabulary: Vocabulary) -> dict[str, Any]:
    """The JSON schema of an answer: event types of the closed set, relations of the vocabulary."""
    event = {"type": "object", "additionalProperties": False, "required": ["event_type", "keywords", "summary"],
             "properties": {"event_type": {"type": "string", "enum": [t.value for t in EventType]},
                            "keywords": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 20}},
                            "summary": {"type": "string", "maxLength": 50}}}
    fact = {"type": "object", "additionalProperties": False, "required": ["relation", "object"],
            "properties": {"relation": {"type": "string", "enum": vocabulary.names},
                           "object": {"type": "string", "maxLength": 60}}}
    return {"type": "object", "additionalProperties": False, "required": ["events", "facts"],
            "properties": {"events": {"type": "array", "minItems": 1, "maxItems": 2, "items": event},
                           "facts": {"type": "array", "maxItems": MAX_FACTS, "items": fact}}}


def response_format(kind: str, vocabulary: Vocabulary) -> dict[str, Any]:
    """The ``response_format`` of the request for an endpoint of ``kind`` (``Settings.llm_response_format``)."""
    if kind == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": "memory", "strict": True, "schema": answer_schema(vocabulary)}}
    if kind == "llama_cpp":
        return {"type": "json_object", "schema": answer_schema(vocabulary)}
    return {"type": "json_object"}


class LLMEvent(BaseModel):
    event_type: EventType
    keywords: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]] = Field(max_length=3)
    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=50)]


class LLMFact(BaseModel):
    relation: RelationName
    object: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]


class LLMOutput(BaseModel):
    """What the model must answer. Keys beyond these are ignored; a missing ``facts`` means none."""

    events: list[LLMEvent] = Field(min_length=1)
    facts: list[LLMFact] = Field(default_factory=list)


class LLMOutcome(BaseModel):
    used_llm: bool
    reason: str  # ok | timeout | unreachable | http_<status> | malformed | schema | budget_exhausted | backoff
    tokens: int = 0  # tokens charged to the tenant's budget by this call


class _Failure(Exception):
    def __init__(self, reason: str, tokens: int = 0) -> None:
        super().__init__(reason)
        self.reason, self.tokens = reason, tokens


def _safe(text: str) -> str:
    """Model text stored like cleaned text: HTML-escaped once, whatever the model echoed."""
    return html.escape(html.unescape(text), quote=False)


class LLMExtractor:
    """Calls the chat endpoint for one message at a time. Close it (or use ``with``) to free connections."""

    def __init__(self, settings: Settings, usage: LLMUsage, vocabulary: Vocabulary | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """``vocabulary``: the deployment's (None: the default file's)."""
        if not settings.llm_base_url:
            raise ConfigurationError("MNEME_LLM_BASE_URL is not set; the LLM stage is off")
        self.settings, self.usage, self.clock = settings, usage, clock
        self.vocabulary = vocabulary or load_vocabulary()
        self.prompt = system_prompt(self.vocabulary)
        self.format = response_format(settings.llm_response_format, self.vocabulary)
        self.url = settings.llm_base_url.rstrip("/") + "/chat/completions"
        headers = {"authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
        self.http = httpx.Client(timeout=settings.llm_timeout_s, headers=headers)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> LLMExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def extract(self, message: Message, rules: Extraction) -> tuple[Extraction, LLMOutcome]:
        """The rules' result for ``message`` with what the model settles (see the module), or the rules' result
        unchanged and the reason why not."""
        day = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%d")
        try:
            output, tokens = self._call(message, day)
            try:
                return self._merged(message, rules, output), LLMOutcome(used_llm=True, reason="ok", tokens=tokens)
            except ValidationError:  # a value valid for the answer but not for an Event or Fact
                raise _Failure("schema", tokens) from None
        except _Failure as failure:
            self.usage.count_failure(failure.reason)
            return rules, LLMOutcome(used_llm=False, reason=failure.reason, tokens=failure.tokens)

    def _call(self, message: Message, day: str) -> tuple[LLMOutput, int]:
        budget = self.settings.llm_daily_token_budget
        if budget <= 0 or self.usage.spent(message.tenant, day) >= budget:
            raise _Failure("budget_exhausted")
        if (paused := self.usage.paused(message.tenant, self.clock())) is True:
            raise _Failure("backoff")
        said = html.unescape(message.content)[:self.settings.llm_max_input_chars]
        prompt = [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": f"role: {message.role.value}\nmessage:\n{said}"},
        ]
        body = {"model": self.settings.llm_model, "messages": prompt, "temperature": 0,
                "max_tokens": self.settings.llm_max_tokens, "response_format": self.format}
        try:
            response = self.http.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise _Failure("timeout") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # refused, DNS, TLS, reset, bad URL
            raise _Failure("unreachable") from exc
        if not response.is_success:
            if response.status_code in (429, 503):  # the provider asks us to slow down: this tenant's calls do
                self.usage.back_off(message.tenant, self.clock(), _retry_after(response),
                                    self.settings.llm_backoff_max_s)
            raise _Failure(f"http_{response.status_code}")
        if paused is False:
            self.usage.recovered(message.tenant)
        try:
            envelope = response.json()
            content = envelope["choices"][0]["message"]["content"]
            usage = envelope.get("usage") or {}
        except (ValueError, LookupError, TypeError, AttributeError):
            raise _Failure("malformed") from None
        if not isinstance(content, str):
            raise _Failure("malformed")
        total = usage.get("total_tokens") if isinstance(usage, dict) else None
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            total = len("".join(m["content"] for m in prompt) + content) // 2
        self.usage.spend(message.tenant, day, total)
        telemetry.LLM_TOKENS.labels(message.tenant).inc(total)
        fenced = _FENCE.match(content)
        try:
            data: Any = json.loads(fenced.group(1) if fenced else content)
        except (ValueError, RecursionError):
            raise _Failure("malformed", total) from None
        try:
            return LLMOutput.model_validate(data), total
        except ValidationError:
            raise _Failure("schema", total) from None

    def _merged(self, message: Message, rules: Extraction, output: LLMOutput) -> Extraction:
        """The rules' result, typed by the model where the rules could not, their less sure claims kept only
        where the model makes them too, and the model's grounded claims added."""
        events = rules.events
        if all(e.event_type is EventType.statement for e in rules.events):
            events = self._events(message, output)
        said = self._said(message, output, events[0].event_id) if message.role is Role.user else []
        check = self.settings.llm_check_below
        facts = [f for f in rules.facts if f.confidence >= check or any(_same(f, m) for m in said)]
        facts += [m for m in said if not any(_same(f, m) for f in rules.facts)]
        return Extraction(events=events, facts=facts)

    def _events(self, message: Message, output: LLMOutput) -> list[Event]:
        events: dict[EventType, Event] = {}
        for item in output.events:  # one event per type: its id is derived from the type
            events.setdefault(item.event_type, Event(
                event_id=ids.event_id(message.tenant, message.user_id, message.session_id, message.message_id,
                                      "llm:" + item.event_type.value),
                tenant=message.tenant,
                user_id=message.user_id,
                session_id=message.session_id,
                ts=message.client_ts,
                event_type=item.event_type,
                role=message.role,
                keywords=[_safe(k) for k in item.keywords][:3],
                summary=cut(_safe(item.summary), 50),
                text_hash=sha256(message.content),
                message_ids=[message.message_id],
                confidence=EVENT_CONFIDENCE,
                tokens=tokenize(message.content),
            ))
        return list(events.values())

    def _said(self, message: Message, output: LLMOutput, evidence: str) -> list[Fact]:
        """The model's claims that hold by the rules' measure (``claims.grounded``), once each; a single-valued
        relation given two values in one message says neither."""
        text = html.unescape(message.content)
        found: dict[tuple[str, str], Fact] = {}
        for item in output.facts:
            if not self.vocabulary.knows(item.relation):  # a relation the deployment does not keep
                continue
            obj = grounded(text, item.relation, item.object)
            if obj is None:
                continue
            found.setdefault((item.relation, obj.casefold()), Fact(
                tenant=message.tenant, user_id=message.user_id, relation=item.relation, object=_safe(obj),
                confidence=self.settings.llm_confidence, source=FactSource.llm, evidence_id=evidence,
                message_ids=[message.message_id], ts=message.client_ts, device_id=message.device_id,
                session_id=message.session_id,
            ))
        values: dict[str, int] = {}
        for relation, _ in found:
            values[relation] = values.get(relation, 0) + 1
        return [f for (relation, _), f in found.items()
                if values[relation] == 1 or not self.vocabulary.spec(relation).single_valued]


def _same(a: Fact, b: Fact) -> bool:
    """The same claim, as near as two readers of one message put it: one relation, one object inside the other."""
    x, y = html.unescape(a.object).casefold(), html.unescape(b.object).casefold()
    return a.relation == b.relation and (x in y or y in x)


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds a provider's ``Retry-After`` asks for (its HTTP-date form is not used by LLM APIs)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if 0 < seconds < 86_400 else None
