"""Child mode for what is already held: a user who becomes a child (``PUT …/child``, or an age under 13
declared in conversation) is brought under child rules at once, not only for what they say next.

The child rules (``memory.state.policy``): working memory sealed at rest, episodic events type only (no
summary, keywords, text, index tokens or vector), no beliefs. ``bring_under_child_rules`` applies them to
what was stored while the user was an adult — every session's message records, cut-reply full texts and
queued job payloads (sealed as ``WorkingMemory.append`` seals a child's, still readable through the API);
every episodic row of every status and every archived one (type only, as a child's are stored); the
user's beliefs with their evidence (``GraphStore.erase_user``, as erasure does) and their reviews, which
hold the claims' text (erasure's reviews store). Then Redis rewrites its append-only file, which still
holds the plaintext commands.

Call it after the child flag is set: from then on new messages are sealed, and new events made type only,
by the write path itself, so this pass needs to run once. Each step is idempotent; a failure midway is
completed by calling it again. The report and its audit record hold counts only.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

from memory.archive import decode, encode, user_prefix
from memory.audit import record
from memory.crypto import seal
from memory.errors import Conflict
from memory.events import Revealed
from memory.runtime import Runtime
from memory.text import language
from memory.userhash import user_hash

#: What a child's event reveals: nothing of its message (``memory.pipeline.rule_stage``).
EMPTY = Revealed(summary="", keywords=[], text="").model_dump_json().encode()
TYPE_ONLY_LANG = language("")  # a child's event is stored with the language of its (empty) text


def bring_under_child_rules(rt: Runtime, tenant: str, user_id: str, operator_id: str,
                            source: str = "human") -> dict[str, int]:
    """Convert what is held for a user now in child mode; returns what was converted, counts only. ``source``
    is the audit record's: "human" when someone set child mode, "pipeline" when the user declared an age."""
    if not rt.state.policies.get(tenant, user_id).child:
        raise Conflict(f"user {user_id!r} is not in child mode: set it first (PUT .../child)")
    key = rt.user_keys.get(tenant, user_id)

    def sealed(event_id: str) -> bytes:
        return seal(key, EMPTY, event_id)  # as ``memory.events`` seals a payload: under the event id

    working = rt.state.working.seal_held(tenant, user_id, key)
    report = {
        "sessions": working["sessions"], "messages_sealed": working["messages"],
        "full_texts_sealed": working["full_texts"], "job_payloads_sealed": working["jobs"],
        "events_stripped": rt.episodic_store.strip_content(tenant, user_id, sealed, TYPE_ONLY_LANG),
        "archived_events_stripped": _strip_archive(rt, tenant, user_id, sealed),
        "beliefs_removed": rt.graph.erase_user(tenant, user_id),
        "reviews_removed": rt.state.reviews.erase(tenant, user_id)["reviews"],  # reviews hold the claims' text
    }
    rt.state.rewrite_append_only_file()
    who = user_hash(rt.user_hash_key, tenant, user_id)
    rt.audit.write([record(rt.user_hash_key, tenant, user_id, "child_mode.convert",
                           f"child-convert:{who}:{time.time()}", operator_id, source, **report)])
    return report


def _strip_archive(rt: Runtime, tenant: str, user_id: str, sealed: Callable[[str], bytes]) -> int:
    """Archived events (``memory.maintenance.to_record``) made type only, object by object."""
    stripped = 0
    for name in rt.archive.list(user_prefix(tenant, user_id)):
        records = decode(rt.archive.get(name))
        for r in records:
            zeros = bytes(len(base64.b64decode(r["vector"])))
            r.update(sealed=base64.b64encode(sealed(r["event_id"])).decode(), tokens=[], lang=TYPE_ONLY_LANG,
                     vector=base64.b64encode(zeros).decode())
        rt.archive.put(name, encode(records))
        stripped += len(records)
    return stripped
