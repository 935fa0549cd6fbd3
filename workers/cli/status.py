"""``mneme status``: backends, queue depths, pending jobs, dead letters and the workers that answer."""

from __future__ import annotations

import typer
from rich.table import Table

from workers.celery_app import QUEUES
from workers.cli.ops import FAILED, Ops, handled


@handled
def status(ctx: typer.Context) -> None:
    """Health of every backend, queue depths, pending jobs, dead letters and the workers that answer."""
    ops: Ops = ctx.obj
    mneme = ops.mneme
    health = mneme.health()
    health.pop("embedder", None)  # loaded by the embed worker, never by this process: its ping below says more
    backends = Table("backend", "state", title="backends")
    for name, state in health.items():
        backends.add_row(name, "[green]ok[/green]" if state == "ok" else f"[red]{state}[/red]")
    ops.out.print(backends)

    if health["redis"] == "ok":
        redis = mneme.state
        depths = redis.broker.depths(QUEUES)
        in_flight, pending, dead = redis.broker.in_flight(), redis.jobs.pending(), redis.dead_letters.size()
        queues = Table("queue", "depth", title="queues")
        for queue, depth in zip(QUEUES, depths, strict=True):
            queues.add_row(queue, str(depth))
        queues.add_row("(in flight, unacked)", str(in_flight))
        ops.out.print(queues)
        ops.out.print(f"pending jobs: {pending}")
        ops.out.print(f"dead letters: {dead}" + ("  (see `mneme dead list`)" if dead else ""))

    try:
        replies = ops.celery.control.ping(timeout=1.0) or []
    except Exception as exc:  # noqa: BLE001 - a broker that is down means no worker answers
        ops.err.print(f"[red]cannot ping workers:[/red] {exc}")
        replies = []
    workers = Table("worker", "reply", title="workers")
    for reply in replies:
        for name, answer in reply.items():
            workers.add_row(name, str(answer.get("ok", answer)))
    ops.out.print(workers if replies else "[red]no worker answered a ping within 1 s[/red]")
    if any(state != "ok" for state in health.values()) or not replies:
        raise typer.Exit(FAILED)
