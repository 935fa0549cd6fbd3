"""Dead letters: a task that failed for good (a permanent error, or its retries used up) is kept here with
its payload and error, so nothing is dropped silently; an operator inspects, replays or drops it
(``mneme dead …``).

Layout (``memory.state.keys``): ``DEAD_LETTERS`` is a list of JSON entries, newest first; ``DEAD_LETTERS_BY_ID``
is a companion hash task id → the exact same JSON string. Each change is one Lua step touching both.

Why a companion hash and not ``LPOS``: ``LPOS`` matches whole elements, and a redelivered failure of the
same task carries another ``failed_at`` and traceback, so finding "this task id" with it would mean
fetching and decoding every entry — on the failure path, which runs hottest during an outage. The hash
makes ``push`` idempotent per task id in O(1) and atomically (a check-and-set inside the script), gives
``get`` by id in O(1), and hands ``remove`` the exact element for ``LREM``. The price is each entry stored
twice, bounded by the cap: past ``CAP`` entries the oldest fall off the list and the hash together.
"""

from __future__ import annotations

import builtins
import time
import traceback as tb
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis
from pydantic import BaseModel

from memory.errors import InvalidInput, NotFound, described
from memory.state import keys
from memory.state.lua import script

CAP = 100_000
TRACEBACK_LINES = 20

_PUSH = script("deadletters.lua", entry="return letter_push(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])")
_REMOVE = script("deadletters.lua", entry="return letter_remove(KEYS[1], KEYS[2], ARGV[1])")


class DeadLetter(BaseModel):
    id: str  # the Celery task id: a redelivered failure of the same task is the same dead letter
    task: str
    queue: str | None = None
    args: builtins.list[Any] = []
    kwargs: dict[str, Any] = {}
    error_type: str
    error_message: str
    traceback: str = ""  # the innermost frames and the error's first line: TRACEBACK_LINES lines at most
    retries: int = 0
    failed_at: float
    job_id: str | None = None
    tenant: str | None = None  # whose job it was (tasks carry ids only, so the payload no longer says)
    user_id: str | None = None


class DeadLetters:
    """The dead-letter list and its companion hash (see the module docstring)."""

    name = "dead_letters"  # a store of user data (``memory.userdata``)

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._push = client.register_script(_PUSH)
        self._remove = client.register_script(_REMOVE)

    def push(self, *, task_id: str, task: str, queue: str | None, args: Sequence[Any] = (),
             kwargs: Mapping[str, Any] | None = None, error: BaseException, traceback: str | None = None,
             retries: int = 0, job_id: str | None = None, owner: tuple[str, str] | None = None,
             cap: int = CAP) -> bool:
        """Keep a failed task with its arguments (ids) and error; False if this task id is already kept.
        ``owner``: the (tenant, user id) the task worked for, so the user's erasure and export find it."""
        tenant, user_id = owner or (None, None)
        letter = DeadLetter(
            id=task_id, task=task, queue=queue, args=builtins.list(args), kwargs=dict(kwargs or {}),
            error_type=type(error).__name__, error_message=described(error)[:2000],
            traceback=_last_frames(error, traceback), retries=retries, failed_at=time.time(), job_id=job_id,
            tenant=tenant, user_id=user_id,
        )
        return bool(self._push(keys=[keys.DEAD_LETTERS, keys.DEAD_LETTERS_BY_ID],
                               args=[task_id, letter.model_dump_json(), cap]))

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[DeadLetter]:
        """Newest first."""
        if limit <= 0:
            return []
        raw = self._redis.lrange(keys.DEAD_LETTERS, offset, offset + limit - 1)
        return [DeadLetter.model_validate_json(r) for r in raw]

    def get(self, letter_id: str) -> DeadLetter:
        raw = self._redis.hget(keys.DEAD_LETTERS_BY_ID, letter_id)
        if raw is None:
            raise NotFound(f"no dead letter {letter_id!r} (replayed, dropped, or never failed)")
        return DeadLetter.model_validate_json(raw)

    def remove(self, letter_id: str) -> bool:
        """Drop one dead letter; False if there was none."""
        return bool(self._remove(keys=[keys.DEAD_LETTERS, keys.DEAD_LETTERS_BY_ID], args=[letter_id]))

    def size(self) -> int:
        return int(self._redis.llen(keys.DEAD_LETTERS))

    def of_user(self, tenant: str, user_id: str) -> builtins.list[DeadLetter]:
        """Dead letters of this user's tasks."""
        letters = [DeadLetter.model_validate_json(v) for v in self._redis.hvals(keys.DEAD_LETTERS_BY_ID)]
        return [d for d in letters if _belongs(d, tenant, user_id)]

    def replay(self, letter_id: str, send: Callable[[str, dict[str, Any]], object]) -> DeadLetter:
        """Send the stored task again with its keyword arguments, then drop the dead letter — only after the
        send went through, so a failed send keeps it. The re-sent task gets a new task id: if it fails again
        it becomes a new dead letter instead of colliding with this one while it is being removed."""
        letter = self.get(letter_id)
        if letter.args:
            raise InvalidInput(f"dead letter {letter_id!r} has positional arguments; Mneme tasks take keywords only")
        send(letter.task, letter.kwargs)
        self.remove(letter_id)
        return letter

    # --- the user-data protocol (``memory.userdata``) ---
    def count(self, tenant: str, user_id: str) -> int:
        return len(self.of_user(tenant, user_id))

    def export(self, tenant: str, user_id: str) -> builtins.list[dict[str, Any]]:
        return [d.model_dump(mode="json") for d in self.of_user(tenant, user_id)]

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: sum(self.remove(d.id) for d in self.of_user(tenant, user_id))}


def _belongs(letter: DeadLetter, tenant: str, user_id: str) -> bool:
    if (letter.tenant, letter.user_id) == (tenant, user_id):
        return True
    kw = letter.kwargs  # a letter kept before tasks carried ids only: its payload names the user
    payloads = [kw, kw.get("message"), kw.get("item"), *(kw.get("facts") or [])]
    return any(isinstance(p, dict) and p.get("tenant") == tenant and p.get("user_id") == user_id for p in payloads)


def _last_frames(error: BaseException, fallback: str | None) -> str:
    """The innermost frames and the error's first line. The frames come from the exception itself when it
    has them: a long message (a validation error lists every field) would push them out of a plain tail;
    the message is kept whole in ``error_message`` anyway."""
    if error.__traceback__ is not None:
        lines = "".join(tb.format_tb(error.__traceback__)).splitlines()[-(TRACEBACK_LINES - 1):]
        return "\n".join([*lines, tb.format_exception_only(error)[0].splitlines()[0]])
    return "\n".join((fallback or "").rstrip("\n").splitlines()[-TRACEBACK_LINES:])


