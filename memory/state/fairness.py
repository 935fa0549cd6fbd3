"""Tenant-fair work: each tenant has at most ``MNEME_TENANT_WINDOW`` jobs in the pipeline at once; the rest
wait in the tenant's own line, in the order they came, and are let in as its jobs in flight end.

The pipeline's queues are first in, first out, so without this one tenant's flood of 5,000 messages sits
ahead of everyone else's work until it has drained (``make bench``: 23.8× slower for the tenant behind it).
With it, a tenant's new work waits behind at most a window of each other active tenant's jobs at every
stage, and a tenant alone still fills the pipeline (the window is several batches of every stage).

- The API process hands each batch of accepted jobs to ``admit`` (``workers.api.sends``): those the tenant
  has room for are sent to extraction at once, the others wait here. A tenant with more than
  ``MNEME_TENANT_QUEUE_LIMIT`` waiting is answered 429 (``RateLimited``, with ``Retry-After``) before
  anything of the message is accepted.
- A worker that finished a batch hands its jobs that ended to ``ended`` (``tasks.pipeline``), which lets as
  many of the same tenants' waiting jobs in; the worker sends their extraction.
- A job that ended unseen (its user erased, its message taken back, a crash between the two steps) holds a
  place until someone looks: when a tenant has work waiting and its oldest job in flight is older than
  ``STUCK_S``, the step that saw it asks the pending sets which of its jobs in flight are still unfinished
  and frees the others (a process looks at a tenant at most every ``LOOK_EVERY_S``: a pipeline that is only
  slow keeps looking stuck, and every look asks after the whole window); the redrive (``memory.redrive``)
  does the same for every tenant with work waiting, and never re-sends a job that is waiting its turn.

Keys (``keys.fair``) are tagged by tenant, so each step here is one atomic step on one node; they hold job
ids only. A job let in whose extraction never reached the broker is pending and unheld: the redrive re-sends
it as it does any lost job.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import redis

from memory.state import keys
from memory.state.client import decoded, members
from memory.state.lua import script

STUCK_S = 30.0  # a job in flight this long while its tenant has work waiting may have ended unseen
#: how often a process looks for a tenant's jobs that ended unseen while its flight looks stuck: a slow pipeline
#: (workers stopped, a backlog older than STUCK_S) keeps it looking stuck, and a look asks after every job in
#: flight (up to the window): on every step, the API spent ~5-8 ms of each 20 ms on it
LOOK_EVERY_S = 5.0

_ADMIT = script("fair.lua", entry="return fair_admit(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], "
                                  "{unpack(ARGV, 3)})")
_ENDED = script("fair.lua", entry="return fair_ended(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], "
                                  "{unpack(ARGV, 3)})")

Sent = tuple[str, str | None]  # (job id, the id of the HTTP request that caused it)
Unfinished = Callable[[Sequence[str]], list[str]]  # ``Jobs.unfinished``


class Place(NamedTuple):
    """What a step did for one tenant: the jobs it let in, and how many still wait."""

    let_in: list[Sent]
    waiting: int


class FairShare:
    def __init__(self, client: redis.Redis, window: int, unfinished: Unfinished,
                 look_every_s: float = LOOK_EVERY_S) -> None:
        self._redis = client
        self._window = window
        self._unfinished = unfinished
        self._look_every_s = look_every_s
        self._looked: dict[str, float] = {}  # tenant → when this process last looked for jobs that ended unseen
        self._admit = client.register_script(_ADMIT)
        self._ended = client.register_script(_ENDED)

    @property
    def on(self) -> bool:
        return self._window > 0

    def admit(self, jobs: Mapping[str, Sequence[Sent]]) -> dict[str, Place]:
        """Each tenant's new jobs join its line; returns, per tenant, those let in (to send now) and how
        many wait. One round trip (two when a tenant with work waiting looks stuck)."""
        if not self.on:
            return {tenant: Place(list(sent), 0) for tenant, sent in jobs.items()}
        args = {tenant: [x for job_id, rid in sent for x in (job_id, rid or "")] for tenant, sent in jobs.items()}
        places = self._run(self._admit, args)
        if waiting := [tenant for tenant, place in places.items() if place.waiting]:
            self._redis.sadd(keys.FAIR_TENANTS, *waiting)
        return places

    def ended(self, jobs: Iterable[tuple[str, str]]) -> list[Sent]:
        """(tenant, job id) of jobs that ended, or were seen ended: they leave their tenant's flight, and the
        tenant's waiting jobs take their places. Returns the jobs let in, to send to extraction."""
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, job_id in jobs:
            by_tenant[tenant].append(job_id)
        if not self.on or not by_tenant:
            return []
        return [sent for place in self._run(self._ended, by_tenant).values() for sent in place.let_in]

    def forget(self, tenant: str, job_ids: Sequence[str]) -> None:
        """An erased user's jobs leave their tenant's line and flight (the next step lets others in)."""
        if not job_ids:
            return
        flight, wait, rids = keys.fair(tenant)
        pipe = self._redis.pipeline()  # one tag: one transaction
        pipe.zrem(flight, *job_ids)
        pipe.zrem(wait, *job_ids)
        pipe.hdel(rids, *job_ids)
        pipe.execute()

    def waiting(self, jobs: Sequence[tuple[str, str]]) -> set[str]:
        """Of these (tenant, job id), the jobs waiting their turn (not lost: the redrive leaves them)."""
        pipe = self._redis.pipeline(transaction=False)
        for tenant, job_id in jobs:
            pipe.zscore(keys.fair(tenant)[1], job_id)
        return {job_id for (_, job_id), at in zip(jobs, pipe.execute() if jobs else [], strict=True)
                if at is not None}

    def queued(self, tenant: str) -> tuple[int, int]:
        """(in flight, waiting) for one tenant."""
        flight, wait, _ = keys.fair(tenant)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zcard(flight)
        pipe.zcard(wait)
        in_flight, waiting = pipe.execute()
        return int(in_flight), int(waiting)

    def sweep(self) -> list[Sent]:
        """For every tenant with work waiting: free the places of jobs in flight that ended unseen, and let
        waiting jobs in (the redrive's part). Returns the jobs let in, to send."""
        if not self.on or not (tenants := self._tenants()):
            return []
        places = self._run(self._ended, {tenant: self._gone(tenant, 0.0) for tenant in tenants}, look=False)
        for tenant, place in places.items():
            if place.waiting == 0:
                self._redis.srem(keys.FAIR_TENANTS, tenant)
                if self.queued(tenant)[1]:  # a job joined the line meanwhile: its tenant stays listed
                    self._redis.sadd(keys.FAIR_TENANTS, tenant)
        return [sent for place in places.values() for sent in place.let_in]

    def _tenants(self) -> list[str]:
        return sorted(decoded(self._redis.smembers(keys.FAIR_TENANTS)))

    def _gone(self, tenant: str, older_than_s: float) -> list[str]:
        """Jobs in the tenant's flight longer than ``older_than_s`` that are no longer pending."""
        flight = keys.fair(tenant)[0]
        in_flight = members(self._redis.zrangebyscore(flight, "-inf", time.time() - older_than_s, start=0,
                                                     num=self._window))
        alive = set(self._unfinished(in_flight))
        return [job_id for job_id in in_flight if job_id not in alive]

    def _may_look(self, tenant: str, now: float) -> bool:
        """Whether this process looks at the tenant's flight now (at most every ``look_every_s``)."""
        if now - self._looked.get(tenant, float("-inf")) < self._look_every_s:
            return False
        self._looked[tenant] = now
        return True

    def _run(self, step: Callable[..., object], jobs: Mapping[str, Sequence[str]], look: bool = True
             ) -> dict[str, Place]:
        """One ``fair.lua`` step per tenant in one round trip; a tenant with work waiting whose oldest job
        in flight is older than ``STUCK_S`` has its jobs that ended unseen looked for (at most every
        ``look_every_s``), and freed."""
        now = time.time()
        pipe = self._redis.pipeline(transaction=False)
        for tenant, args in jobs.items():
            step(keys=list(keys.fair(tenant)), args=[self._window, now, *args], client=pipe)
        places: dict[str, Place] = {}
        stuck: dict[str, list[str]] = {}
        for tenant, (let_in, waiting, oldest) in zip(jobs, pipe.execute(), strict=True):
            flat = decoded(let_in)
            places[tenant] = Place([(flat[i], flat[i + 1] or None) for i in range(0, len(flat), 2)], int(waiting))
            if (look and waiting and oldest and now - float(oldest) > STUCK_S and self._may_look(tenant, now)
                    and (gone := self._gone(tenant, STUCK_S))):
                stuck[tenant] = gone
        for tenant, place in (self._run(self._ended, stuck, look=False) if stuck else {}).items():
            places[tenant] = Place(places[tenant].let_in + place.let_in, place.waiting)
        return places
