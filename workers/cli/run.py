"""``mneme run decay|archive|noise|compact|sweep|redrive``: a maintenance job, here and now."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from memory import pipeline
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
    report: dict[str, Any]
    if task in PER_USER:
        with ops.ticking(f"{task.value}: users", "users") as tick:
            done = mneme.maintenance.run(getattr(mneme.maintenance, PER_USER[task]), dry_run=dry_run, limit=limit,
                                         batch_size=batch_size, tick=tick)
        mneme.trail.submit(mneme.trail.layer_changes(done.layer))
        report = done.model_dump()
    elif task is Job.decay:
        with ops.ticking("decay: beliefs", "beliefs") as tick:
            report, records = pipeline.decay_stage(mneme, dry_run=dry_run, limit=limit, batch_size=batch_size,
                                                   tick=tick)
        mneme.trail.submit(records)  # in process: to the sink now, not through the audit queue
    elif task is Job.sweep:
        with ops.ticking("sweep: erasures", "users") as tick:
            report = mneme.privacy.sweep(dry_run=dry_run, limit=limit, batch_size=batch_size, tick=tick)
    else:
        report = _redrive(ops, dry_run, limit)
    ops.json({"task": task.value, **report})


def _redrive(ops: Ops, dry_run: bool, limit: int) -> dict[str, Any]:
    """Re-send the jobs the broker lost, as the beat task does (the stages are idempotent)."""
    report = lost_jobs(ops.mneme, ops.celery, limit)
    if not dry_run:
        with ops.progress() as progress:
            for job_id in progress.track(report["job_ids"], description="re-sending"):
                ops.celery.send_task("memory.extract", task_id=job_id, kwargs={"job_id": job_id})
    return {**report, "resent": 0 if dry_run else len(report["job_ids"]), "dry_run": dry_run}
