"""Every Redis key Mneme uses, built in one place, laid out for Redis Cluster.

A session lives in one of ``SHARDS`` shards (``memory.ids.shard``: two hex digits of a hash), named in
braces in each of its keys — a hash tag, so on a cluster they all share one slot. Its messages' jobs carry
the shard as the first two characters of their id (``memory.ids.job_id``), so a job, the shard's pending set,
its finished jobs' statuses and the shard's index of the sessions and counters the accept step touches are in
that slot too, and each Lua step stays one atomic step on one node. The pairs of global keys a step writes
together share a tag of their own (``{dead-letters}``, ``{audit}``, ``{apikeys}``). What spans shards — a
user's sessions, a tenant's counters, every pending job — is read shard by shard (``SHARD_TAGS``).

| key (`{…}`: a hash tag, `<…>`: a value)  | type | holds                                   | TTL            |
|------------------------------------------|------|-----------------------------------------|----------------|
| mneme:wm:{<sh>}:<t>:<s>:meta          | hash | owner user, head version, last seq, child flag | session TTL |
| mneme:wm:{<sh>}:<t>:<s>:msg           | hash | seq → message record (display text)     | session TTL    |
| mneme:wm:{<sh>}:<t>:<s>:full          | hash | seq → full text of a cut reply          | session TTL    |
| mneme:wm:{<sh>}:<t>:<s>:snap          | hash | version → ordered seqs (kept versions)  | session TTL    |
| mneme:wm:{<sh>}:<t>:<s>:ids           | hash | message_id → "seq|content hash[|r]" (r: retracted) | session TTL |
| mneme:wm:{<sh>}:<t>:<s>:vec           | hash | seq → the newest embedded turn's vector | (13)           |
| mneme:job:{<sh>}:<job_id>             | hash | an unfinished job: state, stages, its tasks' input | job TTL |
| mneme:jobs:done:{<sh>}:<slice>:<id[2]> | hash | job id → a finished job's status line   | done TTL + ¼ (9) |
| mneme:pending:{<sh>}                  | zset | the shard's job ids accepted and not yet done | none (1)  |
| mneme:retracting:{<sh>}               | zset | a rollback's "tenant␟user␟session␟ids" → when | none (10) |
| mneme:sessions:{<sh>}:<t>:<u>         | set  | the user's session ids in the shard (for erasure) | session TTL |
| mneme:metrics:{<sh>}:<t>              | hash | product counters of the shard (aggregates only) | none (2) |
| mneme:metrics:{<sh>}:<t>:failed:<s>   | str  | marks a session counted as failed       | session TTL    |
| mneme:llm:tokens:<tenant>:<yyyymmdd>  | str  | LLM tokens spent that UTC day           | 2 days         |
| mneme:llm:failures                    | hash | reason → count of LLM calls that failed | none (2)       |
| mneme:llm:calls:<tenant>:<minute>     | str  | LLM calls a tenant queued that minute   | 120 s          |
| mneme:llm:backoff:<tenant>            | hash | a tenant's LLM pause: until, how long   | 4 × the pause  |
| mneme:adapter:current                 | str  | the published query-adapter version     | none (3)       |
| mneme:review:<tenant>:<review_id>     | hash | a contradiction waiting for a human     | none; 90 days once resolved |
| mneme:reviews:<tenant>:<user>         | zset | the user's review ids by time           | none (4)       |
| mneme:devices:<tenant>                | hash | device id → the account it is bound to  | none (4)       |
| mneme:user:<tenant>:<user>            | hash | consent (per purpose), child mode       | none (4)       |
| mneme:erasing:{<tenant>}              | zset | users being erased → erased_at          | none (5)       |
| mneme:withdrawing:{<tenant>}          | zset | users who withdrew a purpose → when     | none (12)      |
| mneme:tombstones:{<tenant>}           | zset | hashed erased user → erased_at          | none (5)       |
| mneme:writing:{<tenant>}              | zset | a store write under way: user hash → lease end | 2 min lease |
| mneme:feedback:<tenant>               | hash | feedback counters (useful / not useful) | none (2)       |
| mneme:feedback_pairs:<tenant>:<user>  | list | sealed useful (query, event) pairs      | none (4); newest 1,000 |
| mneme:tenant:<tenant>                 | hash | users, returning users, audit sequence  | none (2)       |
| mneme:{apikeys}                       | hash | key id → key record (secret hashed)     | none (6)       |
| mneme:{apikeys}:hashes                | hash | sha256(secret) → key id                 | none (6)       |
| mneme:ratelimit:<key_id>              | zset | a key's requests of the last 60 s → when | 60 s         |
| mneme:{audit}:outbox                  | hash | audit record id → record, until written | none (8)       |
| mneme:{audit}:due                     | zset | audit record id → when it is due again  | none (8)       |
| mneme:fair:{<tenant>}:flight         | zset | the tenant's job ids in the pipeline → when let in | none (11) |
| mneme:fair:{<tenant>}:wait           | zset | the tenant's job ids waiting for a place → order | none (11) |
| mneme:fair:{<tenant>}:rids           | hash | waiting job id → its HTTP request id; the order counter | none (11) |
| mneme:{fair}:tenants                  | set  | tenants with jobs waiting (for the redrive) | none (11)   |
| mneme:{dead-letters}                  | list | failed tasks as JSON, newest first      | none (7)       |
| mneme:{dead-letters}:by-id            | hash | task id → its dead-letter entry         | none (7)       |
| mneme:stages:progress                 | hash | queue → when a task of it last finished | none (2)       |
| mneme:userkeys:<tenant>               | hash | user → wrapped data key (Redis key store) | none (4)     |

(1) a member leaves when its job is done or failed; the redrive task drops members whose job expired.
(2) a handful of counters (one field per failure reason), kept for operators and metrics.
(3) one small value that must outlive any session; deleting it reverts to the bare embedder.
(4) long-term state of an account, removed when the user is erased.
(6) API keys live until revoked (``mneme keys revoke``).
(5) the erasure sweeper removes a user from ``erasing`` once verified after 24 h, and tombstones once
    older than the job TTL (no queued write can be older than that).
(7) kept until an operator replays or drops them (``mneme dead replay|drop``); capped at 100,000
    entries, past which the oldest fall off list and hash together (``memory.state.deadletters``).
(8) a record leaves once the audit sink has it (``memory.state.outbox``); records hold hashed user ids only.
(9) the jobs of a shard that finished in one quarter of ``job_done_ttl_s`` (the slice), split by the third
    character of their id; the bucket expires a whole TTL after its slice ends (``memory.state.jobs``).
(10) a member leaves when ``memory.retract`` has removed what long-term memory made of those messages; the
    redrive task re-sends one older than ``redrive_after_s``.
(11) a job id leaves when it is let into the pipeline (wait) or ends (flight); ids only, no user data
    (``memory.state.fairness``); a tenant leaves the set once nothing of it waits.
(12) the privacy sweep removes again what serves no purpose left (work that raced the withdrawal) and drops a
    user once the withdrawal is older than the erasure SLA; erasure drops the user at once.
(13) one field: the vector of the session's newest turn embedded so far, for the next turn's context
    (``WorkingMemory.keep_vectors``); ``context_vector_ttl_s`` (15 min), and dropped by any step that takes a
    message back, by child mode and with the session.

The Celery broker's keys (kombu's queues, ``unacked``) are not Mneme's: on a cluster the broker is a Redis of
its own (``MNEME_BROKER_URL``), since kombu speaks to one server.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.ids import job_shard, shard

PREFIX = "mneme"
SHARDS = 256
SHARD_TAGS = tuple(f"{i:02x}" for i in range(SHARDS))
DEAD_LETTERS = f"{PREFIX}:{{dead-letters}}"
DEAD_LETTERS_BY_ID = f"{PREFIX}:{{dead-letters}}:by-id"
AUDIT_OUTBOX = f"{PREFIX}:{{audit}}:outbox"
AUDIT_DUE = f"{PREFIX}:{{audit}}:due"
STAGE_PROGRESS = f"{PREFIX}:stages:progress"


@dataclass(frozen=True)
class SessionKeys:
    meta: str
    msg: str
    full: str
    snap: str
    ids: str
    vec: str

    def all(self) -> list[str]:
        return [self.meta, self.msg, self.full, self.snap, self.ids, self.vec]


def session(tenant: str, session_id: str) -> SessionKeys:
    base = f"{PREFIX}:wm:{{{shard(tenant, session_id)}}}:{tenant}:{session_id}"
    return SessionKeys(
        meta=f"{base}:meta", msg=f"{base}:msg", full=f"{base}:full", snap=f"{base}:snap", ids=f"{base}:ids",
        vec=f"{base}:vec")


def job(job_id: str) -> str:
    return f"{PREFIX}:job:{{{job_shard(job_id)}}}:{job_id}"


def done_jobs(time_slice: int, job_id: str) -> str:
    """The statuses of the finished jobs of one slice of the done TTL whose ids start alike (16 buckets a
    shard and slice, 4,096 in all): a few dozen lines per hash, which Redis stores compactly."""
    return f"{PREFIX}:jobs:done:{{{job_shard(job_id)}}}:{time_slice}:{job_id[2:3]}"


def pending(shard_tag: str) -> str:
    return f"{PREFIX}:pending:{{{shard_tag}}}"


def retracting(shard_tag: str) -> str:
    """The shard's rollbacks whose retraction (``memory.retract``) has not finished yet."""
    return f"{PREFIX}:retracting:{{{shard_tag}}}"


def llm_tokens(tenant: str, day: str) -> str:
    return f"{PREFIX}:llm:tokens:{tenant}:{day}"


LLM_FAILURES = f"{PREFIX}:llm:failures"


def llm_calls(tenant: str, minute: int) -> str:
    return f"{PREFIX}:llm:calls:{tenant}:{minute}"


def llm_backoff(tenant: str) -> str:
    return f"{PREFIX}:llm:backoff:{tenant}"
ADAPTER_CURRENT = f"{PREFIX}:adapter:current"


def review(tenant: str, review_id: str) -> str:
    return f"{PREFIX}:review:{tenant}:{review_id}"


def reviews(tenant: str, user_id: str) -> str:
    return f"{PREFIX}:reviews:{tenant}:{user_id}"


def devices(tenant: str) -> str:
    return f"{PREFIX}:devices:{tenant}"


def user(tenant: str, user_id: str) -> str:
    return f"{PREFIX}:user:{tenant}:{user_id}"


def user_sessions(tenant: str, user_id: str, shard_tag: str) -> str:
    """The user's sessions in one shard: written in the accept step, read shard by shard."""
    return f"{PREFIX}:sessions:{{{shard_tag}}}:{tenant}:{user_id}"


def erasing(tenant: str) -> str:
    return f"{PREFIX}:erasing:{{{tenant}}}"  # tagged like tombstones: an erasure writes both in one step


def withdrawing(tenant: str) -> str:
    return f"{PREFIX}:withdrawing:{{{tenant}}}"


def tombstones(tenant: str) -> str:
    return f"{PREFIX}:tombstones:{{{tenant}}}"


def writing(tenant: str) -> str:
    return f"{PREFIX}:writing:{{{tenant}}}"


def feedback(tenant: str) -> str:
    return f"{PREFIX}:feedback:{tenant}"


def feedback_pairs(tenant: str, user_id: str) -> str:
    return f"{PREFIX}:feedback_pairs:{tenant}:{user_id}"


def user_keys(tenant: str) -> str:
    """The Redis key store's hash (``memory.state.user_keys``), when ``MNEME_KEYS_URL`` is a redis:// URL."""
    return f"{PREFIX}:userkeys:{tenant}"


def metrics(tenant: str, shard_tag: str) -> str:
    """The product counters the accept step counts in one shard (messages, sessions), summed over shards."""
    return f"{PREFIX}:metrics:{{{shard_tag}}}:{tenant}"


def failed_session(tenant: str, session_id: str) -> str:
    return f"{PREFIX}:metrics:{{{shard(tenant, session_id)}}}:{tenant}:failed:{session_id}"


def tenant(tenant_id: str) -> str:
    """Tenant-wide counters that are not a shard's: users, returning users, the audit sequence."""
    return f"{PREFIX}:tenant:{tenant_id}"


def fair(tenant_id: str) -> tuple[str, str, str]:
    """A tenant's place in the pipeline (``memory.state.fairness``): its jobs in flight, its jobs waiting,
    and their request ids, tagged alike so one step moves a job from one to the other."""
    base = f"{PREFIX}:fair:{{{tenant_id}}}"
    return f"{base}:flight", f"{base}:wait", f"{base}:rids"


FAIR_TENANTS = f"{PREFIX}:{{fair}}:tenants"

API_KEYS = f"{PREFIX}:{{apikeys}}"
API_KEY_HASHES = f"{PREFIX}:{{apikeys}}:hashes"


def rate_window(key_id: str) -> str:
    return f"{PREFIX}:ratelimit:{key_id}"


#: The ``memory.userdata`` store that counts, exports and erases each key family holding a user's data.
ERASED_BY = {
    "session": "sessions", "user_sessions": "sessions", "job": "sessions", "done_jobs": "sessions",
    "pending": "sessions", "retracting": "sessions",
    "failed_session": "sessions", "user": "policy", "withdrawing": "policy", "review": "reviews", "reviews": "reviews",
    "devices": "devices", "DEAD_LETTERS": "dead_letters", "DEAD_LETTERS_BY_ID": "dead_letters",
    "feedback_pairs": "feedback_pairs", "user_keys": "keys",
}
#: Key families that hold no user data, and why. ``tests/test_userdata.py`` fails when a family above is in
#: neither table.
NO_USER_DATA = {
    "llm_tokens": "tokens spent per tenant and day",
    "LLM_FAILURES": "counts of failed LLM calls by reason",
    "llm_calls": "LLM calls per tenant and minute",
    "llm_backoff": "when a tenant's LLM calls may start again",
    "ADAPTER_CURRENT": "the published adapter's version",
    "erasing": "raw ids of users being erased: the erasure's own work list, left once verified after the SLA",
    "tombstones": "hashed ids of erased users (dropping their queued work)",
    "writing": "hashed ids of users a store write is under way for (an erasure waits for it)",
    "feedback": "tenant-wide feedback counters",
    "metrics": "product counters of a shard (aggregates)",
    "tenant": "tenant-wide counters (aggregates) and the audit sequence",
    "API_KEYS": "API key records (tenants, not users)",
    "API_KEY_HASHES": "hashes of API key secrets",
    "rate_window": "when an API key's requests of the last minute came",
    "AUDIT_OUTBOX": "audit records, which hold hashed user ids only",
    "AUDIT_DUE": "audit record ids",
    "STAGE_PROGRESS": "when each queue last finished a task",
    "fair": "job ids per tenant, waiting or in the pipeline (ids only)",
    "FAIR_TENANTS": "tenant names with jobs waiting",
}
