"""Maintenance run by beat. Each task takes ``dry_run`` and ``limit`` and reports what it did."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from celery import Celery, shared_task, signals

from memory import pipeline
from memory.errors import TransientError
from memory.mneme import Mneme, get_mneme
from memory.pipeline import tuning_stage
from memory.services.maintenance import Job
from tasks.base import MnemeTask
from tasks.envelope import AUDIT_BATCH
from tasks.lifecycle import put_back_expired, put_back_silent
from tasks.pipeline import audit, extract, retract, send_audit, send_extractions

log = logging.getLogger(__name__)

REDRIVE_LIMIT = 500  # jobs (and audit records, retractions) one redrive re-sends at most; the next finds the rest


@shared_task(name="memory.redrive", base=MnemeTask, stage="maintenance", bind=True)
def redrive(self: MnemeTask, dry_run: bool = False, limit: int = REDRIVE_LIMIT) -> dict[str, Any]:
    """Put back on their queues the messages a worker has held longer than the visibility timeout (one that
    never came back, ``tasks.lifecycle``) or holds while it no longer consumes (silent for
    ``MNEME_WORKER_SILENT_AFTER_S``); re-send jobs accepted long ago, still not done and no longer held by
    the broker (lost), audit records long held and still not written, and rollbacks' retractions long
    recorded and still not done. Safe to run twice or concurrently: every stage is idempotent."""
    mneme = get_mneme()
    s = mneme.settings
    put_back = 0 if dry_run else (put_back_expired(self.app, s.visibility_timeout_s)
                                  + put_back_silent(self.app, s.worker_silent_after_s))
    report = lost_jobs(mneme, self.app, limit)
    held = [] if dry_run else mneme.trail.overdue(mneme.settings.redrive_after_s, limit)
    retractions = mneme.working.unfinished_retractions(mneme.settings.redrive_after_s, limit)
    if not dry_run:
        resend(report["job_ids"])
        let_in = mneme.state.fair.sweep()  # places that ended unseen, freed: waiting jobs take them
        send_extractions(let_in)
        report["let_in"] = len(let_in)
        for i in range(0, len(held), AUDIT_BATCH):
            audit.apply_async(kwargs={"records": held[i:i + AUDIT_BATCH]})
        for r in retractions:
            retract.apply_async(kwargs=r.model_dump())
    return {**report, "put_back": put_back, "resent": 0 if dry_run else len(report["job_ids"]), "dry_run": dry_run,
            "audit_records_resent": len(held), "retractions": len(retractions)}


def lost_jobs(mneme: Mneme, app: Celery, limit: int, older_than_s: float | None = None) -> dict[str, Any]:
    """Of the jobs not done after ``older_than_s`` (``MNEME_REDRIVE_AFTER_S`` by default), those no queue, no
    worker and no tenant's line holds: ``stale`` counts them all, ``in_flight`` those still on their way,
    ``waiting`` those waiting their tenant's turn (``memory.state.fairness``), ``job_ids`` the lost ones."""
    stale = pipeline.stale_jobs(mneme, limit, older_than_s)
    held = mneme.state.broker.held_job_ids(app.amqp.queues) if stale else set()  # the broker is this Redis
    unheld = [job_id for job_id in stale if job_id not in held]
    tenants = [(found.tenant, found.job_id) for found in mneme.state.jobs.inputs(unheld)
               if found is not None and found.tenant]
    waiting = mneme.state.fair.waiting(tenants) if tenants else set()
    # not those that finished while the broker was read
    lost = mneme.state.jobs.unfinished([job_id for job_id in unheld if job_id not in waiting])
    return {"stale": len(stale), "in_flight": len(stale) - len(unheld), "waiting": len(waiting), "job_ids": lost}


def resend(job_ids: list[str]) -> None:
    """Lost jobs from the start: their extraction again, which keeps what was recorded and pushes the stages
    that follow (each idempotent)."""
    for job_id in job_ids:
        extract.apply_async(kwargs={"job_id": job_id}, task_id=job_id)


LOST_AFTER_S = 1.0  # longer than a job spends between holders (an API's send interval, a stage's record → push)


@signals.worker_ready.connect
def _resend_lost(sender: Any = None, **_: object) -> None:
    """A worker that starts re-sends the jobs no queue, worker or tenant's line holds: what a worker killed busy
    had taken by BRPOP (``tasks.lifecycle``; it put back what it held before this runs). It looks twice: at once,
    and ``LOST_AFTER_S`` later for the jobs accepted in the second before it started (younger than that, a job
    may still be between holders, so the first look leaves it; restarted within that second, a worker left such
    jobs to ``memory.redrive``, minutes later)."""
    if sender is None:
        return
    _resend_lost_jobs(sender.app)
    later = threading.Timer(LOST_AFTER_S, _resend_lost_jobs, args=(sender.app,))
    later.daemon = True  # a worker shutting down does not wait for it
    later.start()


def _resend_lost_jobs(app: Celery) -> None:
    try:
        lost = lost_jobs(get_mneme(), app, REDRIVE_LIMIT, LOST_AFTER_S)["job_ids"]
        resend(lost)
    except TransientError:
        log.warning("could not look for lost jobs at start; memory.redrive will", exc_info=True)
        return
    if lost:
        log.warning("re-sent %d jobs no queue or worker held (lost by a worker that died busy)", len(lost))


@shared_task(name="memory.train_adapter", base=MnemeTask, stage="maintenance")
def train_adapter(pairs_path: str | None = None, publish: bool = True, dry_run: bool = False, rank: int = 8,
                  epochs: int = 60) -> dict[str, Any]:
    """Fine-tune a LoRA query adapter on (query, positive) pairs from a JSON-lines file, or from useful
    feedback when no file is given; publishing it switches every process to it within seconds."""
    return tuning_stage(get_mneme(), Path(pairs_path) if pairs_path else None, publish=publish,
                        dry_run=dry_run, rank=rank, epochs=epochs)


@shared_task(name="memory.decay", base=MnemeTask, stage="maintenance")
def decay(dry_run: bool = False, limit: int = 100_000, batch_size: int = 500) -> dict[str, Any]:
    """Nightly: materialise decayed confidence, retire beliefs under the floor (kept for audit)."""
    report, records = pipeline.decay_stage(get_mneme(), dry_run=dry_run, limit=limit, batch_size=batch_size)
    if records:
        send_audit(records)
    return report


def _maintain(job: Job, dry_run: bool, limit: int, batch_size: int) -> dict[str, Any]:
    mneme = get_mneme()
    report = mneme.maintenance.run(job, dry_run=dry_run, limit=limit, batch_size=batch_size)
    send_audit(mneme.trail.layer_changes(report.layer))
    return report.model_dump()


@shared_task(name="memory.archive", base=MnemeTask, stage="maintenance")
def archive(dry_run: bool = False, limit: int = 100_000, batch_size: int = 500) -> dict[str, Any]:
    """Nightly: greetings and small talk older than 30 days to cold storage, out of recall."""
    return _maintain(get_mneme().maintenance.archive_user, dry_run, limit, batch_size)


@shared_task(name="memory.downweight_noise", base=MnemeTask, stage="maintenance")
def downweight_noise(dry_run: bool = False, limit: int = 100_000, batch_size: int = 500) -> dict[str, Any]:
    """Nightly: the same event type ≥5 times within 7 days weighs ×0.3 in recall."""
    return _maintain(get_mneme().maintenance.downweight_noise, dry_run, limit, batch_size)


@shared_task(name="memory.compact", base=MnemeTask, stage="maintenance")
def compact(dry_run: bool = False, limit: int = 100_000, batch_size: int = 500) -> dict[str, Any]:
    """Nightly: every user held to the live-event cap (evictions audited)."""
    return _maintain(get_mneme().maintenance.compact_user, dry_run, limit, batch_size)


@shared_task(name="memory.erasure_sweep", base=MnemeTask, stage="maintenance")
def erasure_sweep(dry_run: bool = False, limit: int = 1000, batch_size: int = 1000) -> dict[str, Any]:
    """Hourly: re-run and verify erasures younger than the 24 h SLA (``batch_size``: users per page)."""
    return get_mneme().privacy.sweep(dry_run=dry_run, limit=limit, batch_size=batch_size)
