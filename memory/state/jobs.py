"""Pipeline job state in Redis: what a client polls, and what the redrive task re-sends.

A job is created in the same atomic step that accepts its message (``lua/sessions.lua``); every write of
a job record is a function of ``lua/jobs.lua``. Extraction
declares the branches that follow (embed, graph); each branch completes at most once however often
it is redelivered, and the job is done when the last one completes.

An unfinished job holds its message (``payload``) and, once extracted, what the stages after extraction
need (``work``: the mode, the events and the anchored facts): tasks carry only the job id and read their
input here, so no task argument, dead letter or Flower page holds a user's words. A finished job (done, or
ended on purpose) drops both — the text lives on in memory, not in a copy here — and keeps only its
status: one line in a bucket of finished jobs (``keys.done_jobs``: the jobs that finished in the same
quarter of ``job_done_ttl_s``, sharded by job id), which expires as a whole, so a status stays readable
for 1 to 1.25 × ``job_done_ttl_s`` and costs ~150 bytes instead of a key of its own (~500).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import redis
from pydantic import BaseModel, Field, ValidationError
from redis.typing import EncodableT

from memory import ids
from memory.errors import InvalidInput, NotFound, described
from memory.models import Event, Fact, Message
from memory.state import keys
from memory.state.client import decoded, scored
from memory.state.dispatch import Dispatch
from memory.state.lua import script


def _step(entry: str) -> str:
    return script("jobs.lua", entry=entry)


_START = _step("return job_extracted(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], "
               "ARGV[6])")
_COMPLETE = _step("return job_complete(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])")
_UPDATE = _step("return job_update(KEYS[1], ARGV)")
_FINISH = _step("return job_finish(KEYS[1], KEYS[2], {unpack(KEYS, 3)}, ARGV[1], ARGV[2], ARGV[3], ARGV[4], "
                "ARGV[5])")
_ACCEPT = _step("job_accept(KEYS[1], KEYS[2], cjson.decode(ARGV[1])); return 1")

STAGES = ("extract", "embed", "graph")
DONE_SLICES = 4  # a finished job's bucket expires a slice (job_done_ttl_s / 4) after the TTL
_LOOKED_AT = (0, 1, *range(-1, -DONE_SLICES - 1, -1))  # the slices, from now, a finished job's status may be in
_M = TypeVar("_M", bound=BaseModel)


class JobStatus(BaseModel):
    job_id: str
    tenant: str
    state: str
    user_id: str
    session_id: str
    message_id: str
    accepted_at: float
    finished_at: float | None = None
    stages: dict[str, float]
    event_ids: list[str]
    embed_batch: int | None = Field(None, description="How many messages shared the model call that embedded it.")
    merged: int | None = Field(None, description="How many of its events merged into similar earlier events.")
    llm: str | None = Field(None, description="The LLM stage's outcome (ok, timeout, malformed, …) if it ran.")
    error: str | None = None
    note: str | None = Field(None, description="Why the job ended early (consent off, user erased, or its "
                                               "message retracted: state 'retracted' once nothing of it is left).")


class JobWork(BaseModel):
    """What extraction left for the stages after it."""

    mode: str
    events: list[Event]
    facts: list[Fact] = []


class Declaration(NamedTuple):
    """What extraction declares of a job (``Jobs.extracted_each``): the branches that follow, its event ids
    and their input."""

    job_id: str
    branches: list[str]
    event_ids: list[str]
    work: JobWork
    request_id: str | None = None  # the HTTP request that caused the job, named in its branches' task


#: a branch and the jobs declared with it → the (broker list, task message) pairs that send it
BranchSend = Callable[[str, list["Declaration"]], list[tuple[str, str]]]


class JobInput:
    """A job's stored input, decoded on demand so one malformed job fails alone; a decoding error names
    fields, never values."""

    def __init__(self, job_id: str, payload: str, work: str | None, who: str | None = None) -> None:
        self.job_id, self._payload, self._work, self._who = job_id, payload, work, who

    @property
    def tenant(self) -> str | None:
        """The tenant the job is for (its ``who``, kept in the clear beside the payload), if recorded."""
        try:
            return str(json.loads(self._who)[0]) if self._who else None
        except (ValueError, IndexError, TypeError):
            return None

    def message(self) -> Message:
        return _decode(Message, self._payload, f"job {self.job_id}: its message")

    def work(self) -> JobWork | None:
        """None until extraction has run."""
        return None if self._work is None else _decode(JobWork, self._work, f"job {self.job_id}: its extraction")


def _unfinished(job_id: str, fields: dict[str, str]) -> JobStatus:
    tenant, user_id, session_id, message_id = json.loads(fields["who"])
    return JobStatus(
        job_id=job_id,
        tenant=tenant,
        state=fields["state"],
        user_id=user_id,
        session_id=session_id,
        message_id=message_id,
        accepted_at=float(fields["accepted_at"]),
        finished_at=float(fields["finished_at"]) if "finished_at" in fields else None,
        stages={k[5:]: float(v) for k, v in fields.items() if k.startswith("done:")},
        event_ids=json.loads(fields.get("events", "[]")),
        embed_batch=int(fields["embed_batch"]) if "embed_batch" in fields else None,
        merged=int(fields["merged"]) if "merged" in fields else None,
        llm=fields.get("llm"),
        error=fields.get("error"),
        note=fields.get("note"),
    )


def _finished(job_id: str, line: str) -> JobStatus:
    """A finished job's status line (``lua/jobs.lua`` says its fields)."""
    (state, tenant, user_id, session_id, message_id, accepted, finished, *stage_ms, events, embed_batch, merged,
     llm, error, note) = line.split("|")
    at = float(accepted)

    def after(ms: str) -> float | None:
        return round(at + int(ms) / 1000, 3) if ms else None

    return JobStatus(
        job_id=job_id, tenant=tenant, state=state, user_id=user_id, session_id=session_id, message_id=message_id,
        accepted_at=at, finished_at=after(finished),
        stages={stage: t for stage, ms in zip(STAGES, stage_ms, strict=True) if (t := after(ms)) is not None},
        event_ids=events.split(",") if events else [], embed_batch=int(embed_batch) if embed_batch else None,
        merged=int(merged) if merged else None, llm=llm or None, error=error or None, note=note or None)


def _decode(model: type[_M], raw: str, what: str) -> _M:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidInput(f"{what} is malformed ({described(exc)})") from None


def _pending(job_id: str) -> str:
    return keys.pending(ids.job_shard(job_id))


class Jobs:
    def __init__(self, client: redis.Redis, dispatch: Dispatch, done_ttl_s: int) -> None:
        self._redis = client
        self._dispatch = dispatch  # the branches' tasks, onto the broker once their job is declared
        self._done_ttl_s = done_ttl_s
        self._slice_s = done_ttl_s / DONE_SLICES
        self._start = client.register_script(_START)
        self._complete = client.register_script(_COMPLETE)
        self._update = client.register_script(_UPDATE)
        self._finish = client.register_script(_FINISH)
        self._accept = client.register_script(_ACCEPT)

    def get(self, job_id: str) -> JobStatus:
        [(fields, line)] = self._look_up([job_id])
        if "who" in fields:
            return _unfinished(job_id, fields)
        if line is None:
            raise NotFound(f"no job {job_id!r} (unknown, or older than the job TTL)")
        return _finished(job_id, line)

    def states(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        """Each job's state in one round trip (None: unknown, erased, or older than the TTL)."""
        return {job_id: fields.get("state") or (line.split("|", 1)[0] if line else None)
                for job_id, (fields, line) in zip(job_ids, self._look_up(job_ids, "state"), strict=True)}

    def _look_up(self, job_ids: Sequence[str], field: str | None = None) -> list[tuple[dict[str, str], str | None]]:
        """For each job, in one round trip: its record (every field, or only ``field``) and, once it is
        finished, its status line."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            if field is None:
                pipe.hgetall(keys.job(job_id))
            else:
                pipe.hmget(keys.job(job_id), field)
            for bucket in self.done_buckets(job_id):
                pipe.hget(bucket, job_id)
        replies, out = iter(pipe.execute()), []
        for _ in job_ids:
            record = next(replies)
            if field is None:
                fields = decoded(record)
            else:
                fields = {} if (value := decoded(record[0])) is None else {field: value}
            lines = [decoded(next(replies)) for _ in _LOOKED_AT]
            out.append((fields, next((line for line in lines if line), None)))
        return out

    def owner(self, job_id: str) -> tuple[str, str] | None:
        """(tenant, user id) of a job whose record or status is still kept."""
        try:
            status = self.get(job_id)
        except NotFound:
            return None
        return status.tenant, status.user_id

    def done_buckets(self, job_id: str, now: float | None = None) -> list[str]:
        """The buckets that may hold the job's status once it is finished, the one it goes to if it finishes
        now first (and the next slice's, for a writer whose clock is a little ahead)."""
        at = int((time.time() if now is None else now) // self._slice_s)
        return [keys.done_jobs(at + k, job_id) for k in _LOOKED_AT]

    def _bucket(self, job_id: str, now: float) -> str:
        """Where the status of a job finishing at ``now`` goes."""
        return keys.done_jobs(int(now // self._slice_s), job_id)

    def _done_until(self, now: float) -> int:
        """When the bucket of a job finishing at ``now`` expires: a whole TTL after its slice ends."""
        return int((now // self._slice_s + 1) * self._slice_s + self._done_ttl_s) + 1

    def accept(self, job_id: str, who: tuple[str, str, str, str], payload: str, job_ttl_s: int) -> None:
        """A job record as the accept step writes it, on its own: for a job whose message is accepted
        elsewhere (a test planting a job for a task it sends straight to the broker)."""
        fields = {"job_id": job_id, "who": json.dumps(list(who), ensure_ascii=False), "payload": payload,
                  "job_ttl": job_ttl_s, "now": repr(round(time.time(), 3))}
        self._accept(keys=[keys.job(job_id), _pending(job_id)], args=[json.dumps(fields, ensure_ascii=False)])

    def extracted_each(self, declarations: Sequence[Declaration], send: BranchSend | None = None) -> None:
        """Record each job's extraction once (a redelivered extraction keeps the first), then push the tasks
        of each branch for all the jobs declared with it (``send``: a task a batch of the branch's stage): a
        batch of messages travels the next stages as a task message a stage, not one per message. A job with
        no branch left is done. A job that ended meanwhile (erased, taken back, done) gets neither. The
        extraction's task is acknowledged only after this returns, so a worker that dies between the record
        and the push has its task redelivered, which records nothing new and pushes again (the stages are
        idempotent). One round trip for the records (each job's step atomic on its own), one for the
        pushes."""
        pipe = self._redis.pipeline(transaction=False)
        now = time.time()
        until = self._done_until(now)
        for d in declarations:
            args: list[EncodableT] = [len(d.branches), json.dumps(d.event_ids), now, d.job_id, until,
                                      d.work.model_dump_json(exclude_defaults=True)]
            self._start(keys=[keys.job(d.job_id), _pending(d.job_id), self._bucket(d.job_id, now)], args=args,
                        client=pipe)
        alive = pipe.execute()
        if send is None:
            return
        branches: dict[str, list[Declaration]] = {}
        for d, live in zip(declarations, alive, strict=True):
            for branch in d.branches if live else ():
                branches.setdefault(branch, []).append(d)
        self._dispatch.push([message for branch, declared in branches.items() for message in send(branch, declared)])

    def note(self, job_id: str, **info: int | str) -> None:
        """Facts about how the job went (batch size, merges, LLM outcome), shown by ``get``."""
        self._set(job_id, info)

    def _set(self, job_id: str, fields: Mapping[str, int | str]) -> None:
        """Update a job that still exists (an erased user's jobs are gone and stay gone)."""
        args = [str(x) for kv in fields.items() for x in kv]
        self._update(keys=[keys.job(job_id)], args=args)

    def complete(self, job_id: str, stage: str) -> None:
        """Mark one branch done, once, however often it is redelivered."""
        self.complete_each(stage, {job_id: {}})

    def complete_each(self, stage: str, notes: Mapping[str, Mapping[str, int | str]]) -> None:
        """``note`` then ``complete`` for each job (job id → its facts), in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        now = time.time()
        until = self._done_until(now)
        for job_id, info in notes.items():
            if info:
                self._update(keys=[keys.job(job_id)], args=[str(x) for kv in info.items() for x in kv], client=pipe)
            self._complete(keys=[keys.job(job_id), _pending(job_id), self._bucket(job_id, now)],
                           args=[stage, now, job_id, until], client=pipe)
        pipe.execute()

    def finish(self, job_id: str, state: str, note: str) -> None:
        """End a job on purpose (consent off, user erased, its message retracted by a rollback): it is not
        re-sent, and its text is dropped. Ending it again in the same state changes nothing."""
        now = time.time()
        self._finish(keys=[keys.job(job_id), _pending(job_id), *self.done_buckets(job_id, now)],
                     args=[state, note, now, self._done_until(now), job_id])

    def fail(self, job_id: str, stage: str, error: str) -> None:
        """A permanent failure: the job stops being re-sent and says why."""
        self._set(job_id, {"state": "failed", "error": f"{stage}: {error}"[:2000]})
        self._redis.zrem(_pending(job_id), job_id)

    def inputs(self, job_ids: Sequence[str]) -> list[JobInput | None]:
        """What each job's tasks work on, in one round trip; None for a job with nothing left to do (done,
        ended on purpose, erased, or older than the job TTL)."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hmget(keys.job(job_id), "payload", "work", "who")
        rows = pipe.execute()
        return [JobInput(job_id, payload, work, who) if payload is not None else None
                for job_id, (payload, work, who) in zip(job_ids, rows, strict=True)]

    def input(self, job_id: str) -> JobInput | None:
        return self.inputs([job_id])[0]

    def erase(self, job_ids: Sequence[str]) -> None:
        """Every trace of these jobs: record, status and place in the pending set (an erased user's)."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.delete(keys.job(job_id))
            pipe.zrem(_pending(job_id), job_id)
            for bucket in self.done_buckets(job_id):
                pipe.hdel(bucket, job_id)
        pipe.execute()

    def unfinished(self, job_ids: Sequence[str]) -> list[str]:
        """Those of ``job_ids`` still pending (accepted and not yet done), in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.zscore(_pending(job_id), job_id)
        scores = pipe.execute() if job_ids else []
        return [job_id for job_id, score in zip(job_ids, scores, strict=True) if score is not None]

    def pending(self) -> int:
        """Jobs accepted and not yet done, in every shard."""
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.zcard(keys.pending(tag))
        return sum(int(n) for n in pipe.execute())

    def stale(self, older_than_s: float, limit: int) -> list[str]:
        """Jobs accepted more than ``older_than_s`` ago and still not done, oldest first (at most ``limit``,
        read from every shard in one round trip)."""
        cutoff = time.time() - older_than_s
        pipe = self._redis.pipeline(transaction=False)
        for tag in keys.SHARD_TAGS:
            pipe.zrangebyscore(keys.pending(tag), "-inf", cutoff, start=0, num=limit, withscores=True)
        found = sorted((at, job_id) for reply in pipe.execute() for job_id, at in scored(reply))
        ids = [job_id for _, job_id in found[:limit]]
        out: list[str] = []
        gone: list[str] = []
        for job_id, job in zip(ids, self.inputs(ids), strict=True):
            # the job finished meanwhile, or its record expired: nothing to re-send
            (gone if job is None else out).append(job_id)
        if gone:
            pipe = self._redis.pipeline(transaction=False)
            for job_id in gone:
                pipe.zrem(_pending(job_id), job_id)
            pipe.execute()
        return out

