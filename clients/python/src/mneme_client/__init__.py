"""Mneme's Python client: the memory backend's HTTP API, sync (``MnemeClient``) and async (``AsyncMnemeClient``),
typed with the API's own wire models (``mneme_client.models``), retrying 429 and 503 as the API asks. httpx and
pydantic only. ``mneme_client.langchain`` (extra ``[langchain]``) holds the LangChain and LangGraph integrations.

    from mneme_client import MnemeClient

    with MnemeClient("http://127.0.0.1:8080") as mneme:
        job = mneme.remember(user_id="u1", session_id="s1", message_id="m1", content="我今年17岁，喜欢物理")
        mneme.wait([job.job_id])
        print(mneme.recall(user_id="u1", query="我几岁？").facts)
"""

from mneme_client._client import AsyncMnemeClient, MnemeClient, Retries
from mneme_client.errors import (
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    MnemeAPIError,
    MnemeError,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
)

__all__ = ["AsyncMnemeClient", "Conflict", "ConnectionFailed", "InvalidRequest", "MnemeAPIError", "MnemeClient",
           "MnemeError", "NotFound", "RateLimited", "Retries", "Unauthorized", "Unavailable"]
