"""(query, event) pairs a user marked useful, kept sealed under the user's key for training the LoRA query
adapter; the newest ``KEPT`` per user. A store of user data (``memory.userdata``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis

from memory.crypto import open_text, seal_text
from memory.state import keys
from memory.state.client import decoded

KEPT = 1000
KeyOf = Callable[[str, str], bytes | None]  # (tenant, user id) → the user's key


def _context(tenant: str, user_id: str) -> str:
    return f"feedback-pair\x1f{tenant}\x1f{user_id}"


class FeedbackPairs:
    name = "feedback_pairs"

    def __init__(self, client: redis.Redis, seal_key: KeyOf, open_key: KeyOf) -> None:
        self._redis, self._seal_key, self._open_key = client, seal_key, open_key

    def keep(self, tenant: str, user_id: str, query: str, event_id: str) -> None:
        item = json.dumps({"query": query, "event_id": event_id}, ensure_ascii=False)
        key = self._seal_key(tenant, user_id)
        if key is None:  # cannot happen: ``seal_key`` makes the user's key if need be
            raise RuntimeError(f"no key to seal a feedback pair of user {user_id!r} with")
        sealed = seal_text(key, item, _context(tenant, user_id))
        pipe = self._redis.pipeline()
        pipe.lpush(keys.feedback_pairs(tenant, user_id), sealed)
        pipe.ltrim(keys.feedback_pairs(tenant, user_id), 0, KEPT - 1)
        pipe.execute()

    def of_user(self, tenant: str, user_id: str) -> list[dict[str, str]]:
        """The user's kept pairs (``query``, ``event_id``), opened; none once their key is gone."""
        key = self._open_key(tenant, user_id)
        out: list[dict[str, str]] = []
        for raw in decoded(self._redis.lrange(keys.feedback_pairs(tenant, user_id), 0, -1)):
            opened = open_text(key, raw, _context(tenant, user_id)) if key else None
            if opened is not None:
                out.append(json.loads(opened))
        return out

    def users(self, tenant: str) -> list[str]:
        prefix = keys.feedback_pairs(tenant, "")
        return sorted(k[len(prefix):] for k in self._redis.scan_iter(match=prefix + "*", count=500))

    # --- the user-data protocol ---
    def count(self, tenant: str, user_id: str) -> int:
        return int(self._redis.llen(keys.feedback_pairs(tenant, user_id)))

    def export(self, tenant: str, user_id: str) -> list[dict[str, str]]:
        return self.of_user(tenant, user_id)

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        return {self.name: int(self._redis.delete(keys.feedback_pairs(tenant, user_id)))}
