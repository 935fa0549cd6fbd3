"""Optional LLM extraction stage: one message → typed events + ``llm`` facts via an OpenAI-compatible chat API.

The rules (:mod:`memory.extraction`) always run first; their result is the *fallback*. This stage never
raises for an LLM problem and never loses a message: on a timeout, an unreachable endpoint, an HTTP error,
output that is not the expected JSON, or an exhausted daily token budget it returns the fallback unchanged,
says why in an :class:`LLMOutcome` and counts the reason (``memory.state.llm_usage``).

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
from memory.errors import ConfigurationError
from memory.models import Event, EventType, Extraction, Fact, FactSource, Message, RelationName, Role
from memory.settings import Settings
from memory.state.llm_usage import LLMUsage
from memory.text import cut, sha256, tokenize
from memory.vocabulary import Vocabulary, load_vocabulary

EVENT_CONFIDENCE = 0.6
MAX_COMPLETION_TOKENS = 512

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
facts 只描述用户本人 (facts are about the user only); 助手消息 facts 为空 (assistant message: "facts": []);
用消息的语言写 summary 和 keywords (write them in the message's language)."""


class LLMEvent(BaseModel):
    event_type: EventType
    keywords: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]] = Field(max_length=3)
    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=50)]


class LLMFact(BaseModel):
    relation: RelationName
    object: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=30)]
    confidence: float = Field(ge=0.1, le=1.0)


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
        self.url = settings.llm_base_url.rstrip("/") + "/chat/completions"
        headers = {"authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
        self.http = httpx.Client(timeout=settings.llm_timeout_s, headers=headers)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> LLMExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def extract(self, message: Message, fallback: Extraction) -> tuple[Extraction, LLMOutcome]:
        """The LLM's events and facts for ``message``, or ``fallback`` unchanged and the reason why not."""
        day = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%d")
        try:
            output, tokens = self._call(message, day)
            try:
                return self._build(message, output), LLMOutcome(used_llm=True, reason="ok", tokens=tokens)
            except ValidationError:  # a value valid for the answer but not for an Event or Fact
                raise _Failure("schema", tokens) from None
        except _Failure as failure:
            self.usage.count_failure(failure.reason)
            return fallback, LLMOutcome(used_llm=False, reason=failure.reason, tokens=failure.tokens)

    def _call(self, message: Message, day: str) -> tuple[LLMOutput, int]:
        budget = self.settings.llm_daily_token_budget
        if budget <= 0 or self.usage.spent(message.tenant, day) >= budget:
            raise _Failure("budget_exhausted")
        if (paused := self.usage.paused(message.tenant, self.clock())) is True:
            raise _Failure("backoff")
        prompt = [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": f"role: {message.role.value}\nmessage:\n{html.unescape(message.content)}"},
        ]
        body = {"model": self.settings.llm_model, "messages": prompt, "temperature": 0,
                "max_tokens": MAX_COMPLETION_TOKENS, "response_format": {"type": "json_object"}}
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

    def _build(self, message: Message, output: LLMOutput) -> Extraction:
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
        evidence = next(iter(events.values())).event_id
        facts: dict[tuple[str, str], Fact] = {}
        if message.role is Role.user:
            for found in output.facts:
                if not self.vocabulary.knows(found.relation):  # a relation the deployment does not keep
                    continue
                obj = _safe(found.object)
                facts.setdefault((found.relation, obj.lower()), Fact(
                    tenant=message.tenant, user_id=message.user_id, relation=found.relation, object=obj,
                    confidence=found.confidence, source=FactSource.llm, evidence_id=evidence,
                    message_ids=[message.message_id], ts=message.client_ts, device_id=message.device_id,
                    session_id=message.session_id,
                ))
        return Extraction(events=list(events.values()), facts=list(facts.values()))


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds a provider's ``Retry-After`` asks for (its HTTP-date form is not used by LLM APIs)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if 0 < seconds < 86_400 else None
