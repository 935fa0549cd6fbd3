"""Deterministic ids: the same input always gives the same id, so a redelivered task has no second effect."""

from __future__ import annotations

import hashlib
import re
import uuid

from memory.pinyin import lazy_pinyin

_NAMESPACE = uuid.UUID("6d6e656d-6500-4d6e-8d65-6d6e656d6521")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def shard(tenant: str, session_id: str) -> str:
    """The session's shard, two hex digits: the hash tag of its Redis keys (``memory.state.keys``)."""
    return _digest(tenant, session_id)[:2]


def job_shard(job_id: str) -> str:
    """A job's shard: the first two characters of its id (``job_id``)."""
    return job_id[:2]


def job_id(tenant: str, session_id: str, message_id: str) -> str:
    """The Celery task id of a message's extraction; also the id a client polls. A uuid whose first two
    characters are its session's shard, so its job record lives beside the session's keys."""
    return shard(tenant, session_id) + str(uuid.uuid5(_NAMESPACE, f"{tenant}\x1f{session_id}\x1f{message_id}"))[2:]


def event_id(tenant: str, user_id: str, session_id: str, message_id: str, kind: str) -> str:
    """A message's event of one kind. A message id is its session's own (two sessions may both number
    theirs m1, m2, …), so the session is part of it: without, the second session's event was taken for a
    redelivery of the first's and dropped."""
    return "ev_" + _digest(tenant, user_id, session_id, message_id, kind)[:24]


def concept_id(tenant: str, name: str) -> str:
    """A valid, descriptive graph identifier for any concept name, zh or en: ``[a-z][a-z0-9_]*``, ≤32
    chars, e.g. 楞次定律 → ``lengcidinglv_3f9a1c2e``, "short answers" → ``short_answers_5b0e77d1``."""
    norm = " ".join(name.lower().split())
    slug = re.sub(r"[^a-z0-9]+", "_", "".join(lazy_pinyin(norm)).lower()).strip("_")
    if not slug[:1].isalpha():
        slug = ("c_" + slug).rstrip("_")
    return f"{slug[:23]}_{_digest(tenant, norm)[:8]}"


def user_node_id(tenant: str, user_id: str) -> str:
    return "u_" + _digest(tenant, user_id)[:24]


def relation_id(tenant: str, user_id: str, relation: str, concept: str) -> str:
    return "r_" + _digest(tenant, user_id, relation, concept)[:24]
