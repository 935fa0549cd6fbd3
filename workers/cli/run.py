"""``mneme run decay|archive|noise|compact|sweep|redrive``: a maintenance job, here and now."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any

import typer

from memory import pipeline
from memory.services.maintenance import Job as UserJob
from memory.services.maintenance import Report
from tasks.maintenance import lost_jobs
from workers.cli.ops import Ops, handled


class Job(StrEnum):
    decay = "decay"
    archive = "archive"
    noise = "noise"
    compact = "compact"
    sweep = "sweep"
    redrive = "redrive"


# (limit, batch_size) as the beat tasks default them
DEFAULTS = {Job.decay: (100_000, 500), Job.archive: (100_000, 500), Job.noise: (100_000, 500),
            Job.compact: (100_000, 500), Job.sweep: (1000, 1000), Job.redrive: (500, 500)}
PER_USER = {Job.archive: "archive_user", Job.noise: "downweight_noise", Job.compact: "compact_user"}


@handled
def run_job(ctx: typer.Context, task: Job,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; change nothing.")]
            = False,
            limit: Annotated[int | None, typer.Option(min=1)] = None,
            batch_size: Annotated[int | None, typer.Option(min=1)] = None) -> None:
    """Run a maintenance job in this process now (not through the queue) and print its report."""
    ops: Ops = ctx.obj
    mneme = ops.mneme
    limit = limit or DEFAULTS[task][0]
    batch_size = batch_size or DEFAULTS[task][1]
    if task in PER_USER:
        job = getattr(mneme.maintenance, PER_USER[task])
        report = _per_user(ops, job, task.value, dry_run, limit, batch_size)
    elif task is Job.decay:
        with ops.err.status("decaying beliefs…"):
            report, records = pipeline.decay_stage(mneme, dry_run=dry_run, limit=limit, batch_size=batch_size)
        mneme.trail.submit(records)  # in process: to the sink now, not through the audit queue
    elif task is Job.sweep:
        with ops.err.status("verifying erasures…"):
            report = mneme.privacy.sweep(dry_run=dry_run, limit=limit, batch_size=batch_size)
    else:
        report = _redrive(ops, dry_run, limit)
    ops.json({"task": task.value, **report})


def _per_user(ops: Ops, job: UserJob, name: str, dry_run: bool, limit: int, batch_size: int) -> dict[str, Any]:
    """``Maintenance.run`` with a progress bar: the same job, user by user."""
    mneme = ops.mneme
    report, now = Report(dry_run=dry_run), time.time()
    with ops.progress() as progress:
        bar = progress.add_task(f"{name}: users", total=None)
        for tenant, user_id in mneme.maintenance.each_user(limit, batch_size):
            report.users += 1
            job(tenant, user_id, report, now)
            progress.advance(bar)
        progress.update(bar, total=report.users)
    mneme.trail.submit(mneme.trail.layer_changes(report.layer))
    return report.model_dump()


def _redrive(ops: Ops, dry_run: bool, limit: int) -> dict[str, Any]:
    """Re-send the jobs the broker lost, as the beat task does (the stages are idempotent)."""
    report = lost_jobs(ops.mneme, ops.celery, limit)
    if not dry_run:
        with ops.progress() as progress:
            for job_id in progress.track(report["job_ids"], description="re-sending"):
                ops.celery.send_task("memory.extract", task_id=job_id, kwargs={"job_id": job_id})
    return {**report, "resent": 0 if dry_run else len(report["job_ids"]), "dry_run": dry_run}
