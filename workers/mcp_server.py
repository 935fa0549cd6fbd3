"""Mneme as an MCP server: five tools an agent calls to remember, recall, inspect and erase a user's memory,
and to record the user's consent to long-term memory.

Thin by design: every tool is one call to the HTTP API through `mneme_client.MnemeClient`, reshaped into
a compact JSON result; all memory logic stays behind the API. Configuration:

- ``MNEME_API_URL``: the Mneme API; unset = the stack running from the data dir (``MNEME_DATA_DIR``, default
  ``var``), found through the ``stack.json`` it writes, else http://127.0.0.1:``MNEME_API_PORT`` (8080), where
  ``make run`` serves it. Looked up per call, so a restarted stack is found again;
- ``MNEME_API_KEY``: optional, sent as ``Authorization: Bearer <key>``.

Run ``python -m workers.mcp_server`` (stdio, for MCP clients that spawn the server) or
``python -m workers.mcp_server --http --port 8765`` (streamable HTTP at ``/mcp``). Its SDK is the ``mcp`` extra,
which ``make run`` installs; without it the server exits with one line naming the ``pip install`` to run.

Note: this module uses the official ``mcp`` SDK 2.x, where ``FastMCP`` is named ``MCPServer``
(``mcp.server.mcpserver``); the decorator API is the same.
"""

import argparse
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

import httpx

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
except ModuleNotFoundError as missing:  # `make run` installs it; a bare `pip install mneme` does not
    if (missing.name or "").partition(".")[0] != "mcp":
        raise
    sys.exit(f"the MCP server needs the mcp extra, not installed for {sys.executable}: run "
             f"`{sys.executable} -m pip install -e '.[mcp]'` in the Mneme checkout (`make run` installs it)")
from mneme_client import ConnectionFailed, MnemeAPIError, MnemeClient, Retries
from mneme_client.models import Id
from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12

from memory.settings import Settings
from workers.local.stack import find_running

INSTRUCTIONS = """\
Mneme is the long-term memory of your conversations with a user (Chinese, English or both).
Call `remember` for every message of the conversation (the user's and your own replies), verbatim.
Call `recall` before answering whenever the answer may depend on something said earlier
(我几岁 / 上次那个方案 / what did you suggest last time) and use the facts and events it returns.
Call `profile` for an overview of what is known about the user. Call `forget` only when the user asks
to delete everything remembered about them, and only with confirm=true after they confirmed.
Long-term memory may be off until the user opts in (recall then reports it in `degraded`): ask them, and
call `consent` with long_term=true only after they said yes (false when they withdraw it).
Memory is written asynchronously: a fact remembered now shows up in recall a few seconds later."""

mcp = MCPServer("mneme", instructions=INSTRUCTIONS)

UserId = Annotated[Id, Field(description="The user's stable id (the same on every device and session).")]


def api_url() -> tuple[str, str]:
    """The API to call, and why the running stack was not found there ('' when it was, or was not looked for)."""
    if url := os.environ.get("MNEME_API_URL"):
        return url, ""
    settings = Settings()
    state, why = find_running(settings.data_dir)
    return (state.api_url, "") if state else (f"http://127.0.0.1:{settings.api_port}", why)  # where `make run` binds


@contextmanager
def _api() -> Iterator[MnemeClient]:
    """A client for one tool call; API errors become tool errors the agent can read."""
    url, why = api_url()
    try:
        # the read audit names the agent reading: the MCP server's agent, or "mcp"
        with MnemeClient(url, api_key=os.environ.get("MNEME_API_KEY") or None, retries=Retries(attempts=2),
                         agent=os.environ.get("MNEME_AGENT") or "mcp") as client:
            yield client
    except MnemeAPIError as exc:
        raise ToolError(f"Mneme API error {exc.status} {exc.error}: {exc.message}") from exc
    except (ConnectionFailed, httpx.HTTPError) as exc:
        raise ToolError(f"Mneme API at {url} unreachable: {exc}"
                        + (f" ({why}; start it with `make run`)" if why else "")) from exc


def _r(x: float) -> float:
    return round(x, 3)


# ---- results -------------------------------------------------------------------------------------------------------

class Remembered(TypedDict):
    job_id: str
    version: int
    message_id: str
    duplicate: bool
    in_window: bool


class RecalledFact(TypedDict):
    relation: str
    object: str
    confidence: float
    source: str
    why: str
    message_ids: list[str]


class RecalledEvent(TypedDict):
    type: str
    summary: str
    score: float
    relevance: float
    weak: bool
    role: str
    session_id: str
    message_ids: list[str]


class WindowMessage(TypedDict):
    message_id: str
    role: str
    content: str
    client_ts: float


class Recalled(TypedDict):
    facts: list[RecalledFact]
    events: list[RecalledEvent]
    working: list[WindowMessage]
    degraded: dict[str, str]


class ProfileBelief(TypedDict):
    relation: str
    object: str
    confidence: float
    source: str
    explanation: str
    message_ids: list[str]


class UserProfile(TypedDict):
    user_id: str
    beliefs: list[ProfileBelief]
    open_reviews: int
    known: bool


class ConsentState(TypedDict):
    user_id: str
    long_term: bool
    kept: bool
    purposes: list[str]
    consent_required: bool
    changed_at: float | None
    changed_by: str | None


class ErasureReceipt(TypedDict):
    user: str
    erased_at: float
    removed: dict[str, int]
    remaining: dict[str, int]
    complete: bool


# ---- tools ---------------------------------------------------------------------------------------------------------

@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
          structured_output=True)
def remember(
    user_id: UserId,
    session_id: Annotated[Id, Field(examples=["s_1"],
                                    description="The conversation's id; keep it for the whole conversation.")],
    content: Annotated[str, Field(min_length=1, description="The message text, verbatim, in its own language.")],
    role: Annotated[Literal["user", "assistant"], Field(description="Who wrote it.")] = "user",
    message_id: Annotated[Id | None, Field(description="Your id for the message; resending the same id is a "
                                                       "harmless retry. Default: a new random id.")] = None,
    device_id: Annotated[Id | None, Field(description="The device the user writes from (phone, laptop…).")] = None,
) -> Remembered:
    """Store one conversation message in the user's memory. 记住对话中的一条消息。

    Use it for EVERY message of the conversation, as it happens: each user message (role "user") and each of
    your own replies (role "assistant"), in whatever language it was written — Chinese, English or mixed.
    Send the text verbatim; do not translate or summarise (Mneme extracts age, name, grade, likes/dislikes,
    confusions, goals, plans itself, e.g. "我今年16岁，上高一" or "I love physics animations").
    每条用户消息和你自己的回复都要调用，原文照发，不要翻译或总结。

    Returns at once with a job id: long-term memory is written in the background and is visible to `recall`
    and `profile` a few seconds later; the message is in the session's working window immediately.
    """
    with _api() as api:
        accepted = api.remember(user_id=user_id, session_id=session_id, message_id=message_id or uuid.uuid4().hex,
                                role=role, content=content, device_id=device_id)
    return Remembered(job_id=accepted.job_id, version=accepted.version, message_id=accepted.message_id,
                      duplicate=accepted.duplicate, in_window=accepted.in_window)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
def recall(
    user_id: UserId,
    query: Annotated[str, Field(min_length=1, max_length=2000,
                                description="What you need to know, in the user's words and language.")],
    session_id: Annotated[Id | None, Field(description="The current conversation: also returns its recent "
                                                       "messages (the working window).")] = None,
    k: Annotated[int, Field(ge=1, le=50, description="How many past events to return.")] = 5,
    purpose: Annotated[str | None, Field(description="What you will use the answer for (e.g. tutoring, support): "
                                                     "only what the user allowed for it is returned. Omitted: any "
                                                     "purpose they allowed.")] = None,
) -> Recalled:
    """Look up what the user told you before, across sessions and devices. 回忆用户以前说过的内容。

    Use it BEFORE answering whenever the answer may depend on earlier conversations: the user's age, name,
    grade or school, what they like or dislike, how they prefer answers, what they find confusing, what
    plan or example you gave last time. Typical questions: "我几岁？", "我上几年级？", "上次那个方案是什么？",
    "你上次说的那个变量名叫什么", "How old am I?", "What did you suggest last time?". Ask in the user's own
    words; Chinese and English memories are found with either language.
    回答依赖以前对话的问题前先调用（年龄、年级、喜好、易混概念、上次给的方案等），中英文都能查到。

    Returns `facts` (beliefs about the user with effective confidence 0.1–1 and why they were chosen),
    `events` (past messages as typed summaries, best first, each with its relevance 0–1, `weak` when it likely
    does not answer the question, and the message ids they came from),
    `working` (the session's recent messages, when session_id is given) and `degraded` (memory layers that
    could not answer, e.g. the user has not consented to long-term memory). Prefer high-confidence facts.
    """
    with _api() as api:
        result = api.recall(user_id=user_id, query=query, k=k, session_id=session_id, purpose=purpose)
    return Recalled(
        facts=[RecalledFact(relation=str(f.relation), object=f.object, confidence=_r(f.confidence),
                            source=str(f.source), why=f.why, message_ids=f.message_ids) for f in result.facts],
        events=[RecalledEvent(type=str(e.event_type), summary=e.summary, score=_r(e.score),
                              relevance=_r(e.relevance), weak=e.weak, role=str(e.role),
                              session_id=e.session_id, message_ids=e.message_ids) for e in result.events],
        working=[WindowMessage(message_id=m.message_id, role=str(m.role), content=m.content, client_ts=m.client_ts)
                 for m in result.working],
        degraded=result.degraded,
    )


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
def profile(
    user_id: UserId,
    purpose: Annotated[str | None, Field(description="What you will use it for: only the beliefs the user allowed "
                                                     "for it. Omitted: any purpose they allowed.")] = None,
) -> UserProfile:
    """Everything Mneme currently believes about the user, with why. 查看对用户的全部认识及其依据。

    Use it at the start of a conversation to personalise your answers, or when the user asks what you know
    or remember about them ("你记得我什么？", "你知道我多少岁吗", "What do you know about me?"). Each belief
    (age, name, grade, school, likes, dislikes, learning style, response preference, mastery, learning
    obstacle, emotion, goal) has its effective confidence (decayed to now, 0.1–1), its source (rule, llm,
    human, counter_evidence), the message ids it came from and a step-by-step explanation of the confidence.
    `open_reviews` counts contradictions waiting for a human. `known` is false when nothing at all is stored
    for this user id (a new user, a mistyped id, or one erased): you have never talked with them, as far as
    Mneme knows. For a specific question prefer `recall`.
    """
    with _api() as api:
        body = api.profile(user_id, purpose=purpose)
    return UserProfile(
        user_id=body.user_id,
        beliefs=[ProfileBelief(relation=str(b.relation), object=b.object, confidence=_r(b.confidence),
                               source=str(b.source), explanation=b.why, message_ids=b.message_ids)
                 for b in body.beliefs],
        open_reviews=len(body.open_reviews),
        known=body.known,
    )


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
          structured_output=True)
def forget(
    user_id: UserId,
    confirm: Annotated[bool, Field(description="Must be true, and only after the user confirmed. "
                                               "Anything else refuses and erases nothing.")] = False,
) -> ErasureReceipt:
    """Erase EVERYTHING remembered about the user, irreversibly. 永久删除关于该用户的全部记忆。

    Use it only when the user explicitly asks to be forgotten or to delete their data ("忘掉我", "删除我的所有
    记录", "别再记住我了", "Forget everything about me", "Delete my data"). First tell them it cannot be undone
    and ask for confirmation; call with confirm=true only after they said yes. Without confirm=true the call
    is refused and nothing is erased. 只有用户明确要求删除时才调用；先向用户确认，确认后再传 confirm=true。

    Erases working memory, episodic events, beliefs, archive, reviews, devices and the user's key. Returns
    the erasure receipt (hashed user id, what was removed where, what remains: all zero when complete).
    To correct a single wrong belief, do not use this.
    """
    if confirm is not True:
        raise ToolError("Refused: forget erases all of the user's memory irreversibly. Ask the user to confirm, "
                        "then call forget again with confirm=true. Nothing was erased. "
                        "已拒绝：删除不可撤销，请先征得用户确认，再以 confirm=true 调用。")
    with _api() as api:
        receipt = api.erase(user_id).model_dump()
    return ErasureReceipt(user=receipt["user"], erased_at=receipt["erased_at"], removed=receipt["removed"],
                          remaining=receipt["remaining"], complete=receipt["complete"])


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
          structured_output=True)
def consent(
    user_id: UserId,
    long_term: Annotated[bool | None, Field(description="true: the user agreed to be remembered across "
                                                        "conversations; false: they withdrew it; omitted: only "
                                                        "report where they stand, change nothing.")] = None,
    purposes: Annotated[list[str] | None, Field(description="With long_term=true: the purposes the user agreed to "
                                                            "(e.g. [\"tutoring\"]); omitted: every purpose. A purpose "
                                                            "they agreed to before and leave out now is withdrawn.")
                        ] = None,
) -> ConsentState:
    """Record the user's choice about long-term memory, or read it. 记录或查看用户是否同意长期记忆。

    Use it when the user agrees to be remembered ("可以，记住我吧", "以后都记得我说过的话", "Yes, you can remember
    this", "Remember me from now on"): call with long_term=true. Use long_term=false when they take it back
    ("别再记我的事了", "stop remembering things about me"). Never opt a user in on your own: ask first, and only
    after they said yes. Without long_term it changes nothing and tells you where they stand.
    只有用户明确同意后才传 long_term=true；用户撤回时传 false；不传则只查看当前状态。

    Until the user opts in (when the deployment requires consent) only the current conversation's window is
    kept: nothing reaches `recall` or `profile` across conversations, and `recall` says so in `degraded`.
    Consent applies to messages from then on; earlier ones are not kept retroactively. Withdrawing stops new
    long-term memory and hides what was kept from recall; to delete it use `forget`.

    Consent is per purpose (tutoring, support…): when the user agrees only to some, pass them in `purposes`;
    what was kept only for a purpose they later leave out is deleted.
    同意可以按用途给出（如只用于辅导）：传 purposes；以后去掉的用途，仅为它保存的记忆会被删除。

    Returns `long_term` (the user's recorded choice), `kept` (whether long-term memory is kept for them now),
    `purposes` (what they agreed to), `consent_required`, and when and by whom the choice was last changed.
    """
    with _api() as api:
        policy = (api.policy(user_id) if long_term is None
                  else api.consent(user_id, long_term, operator_id="mcp", purposes=purposes))
    return ConsentState(user_id=policy.user_id, long_term=policy.long_term, kept=policy.keeps_long_term,
                        purposes=policy.purposes, consent_required=policy.consent_required,
                        changed_at=policy.consent_changed_at, changed_by=policy.consent_by)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workers.mcp_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per API call is noise on stderr
    if args.http:
        mcp.run("streamable-http", host=args.host, port=args.port)
    else:
        mcp.run()


if __name__ == "__main__":
    main()
