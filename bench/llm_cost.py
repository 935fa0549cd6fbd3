"""What the LLM stage costs a message (the ``llm`` section of ``make bench``): the stage's call through
``memory.llm.LLMExtractor`` — its budget check, the request, the guards — against a local llama.cpp server
serving gemma-3-270m (``tests/llama_server.py``), beside the raw baseline: the same request body POSTed straight
to the same server, in the same run. Messages: the bench conversations' user turns."""

from __future__ import annotations

import statistics
import time

import httpx
import redis

from bench.load import corpus
from memory import extraction
from memory.llm import LLMExtractor
from memory.models import Message, Role
from memory.settings import Settings
from memory.state.llm_usage import LLMUsage
from memory.text import clean


def bench_llm(redis_url: str, n: int) -> dict:
    from tests.llama_server import MODEL, LlamaServer

    texts = [text for role, text in corpus() if role == "user"][:n]
    messages = [Message(tenant="bench", user_id="u", session_id="s", message_id=f"m{i}", role=Role.user,
                        content=clean(text), client_ts=time.time()) for i, text in enumerate(texts)]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with LlamaServer(threads=2) as server:
        settings = Settings(llm_base_url=server.base_url, llm_model=MODEL, llm_response_format="llama_cpp",
                            llm_timeout_s=120, llm_daily_token_budget=10**9)
        with LLMExtractor(settings, LLMUsage(client)) as llm, httpx.Client(timeout=120) as http:
            body = {"model": MODEL, "temperature": 0, "max_tokens": settings.llm_max_tokens,
                    "response_format": llm.format}
            stage_ms, raw_ms, tokens, reasons = [], [], [], []
            for message in messages:
                prompt = [{"role": "system", "content": llm.prompt},
                          {"role": "user", "content": f"role: user\nmessage:\n{message.content}"}]
                t = time.perf_counter()
                http.post(f"{server.base_url}/chat/completions", json=body | {"messages": prompt}).raise_for_status()
                raw_ms.append(1000 * (time.perf_counter() - t))
                t = time.perf_counter()
                _, outcome = llm.extract(message, extraction.extract(message))
                stage_ms.append(1000 * (time.perf_counter() - t))
                tokens.append(outcome.tokens)
                reasons.append(outcome.reason)
    client.close()
    return {"messages": len(messages), "model": "gemma-3-270m q4_k_m (llama-cpp-python server, 2 threads)",
            "stage_ms_p50": statistics.median(stage_ms), "stage_ms_max": max(stage_ms),
            "raw_ms_p50": statistics.median(raw_ms), "tokens_per_message": statistics.mean(tokens),
            "answers_ok": reasons.count("ok"), "outcomes": {r: reasons.count(r) for r in set(reasons)}}
