"""``mneme status``: backends, queue depths, pending jobs, dead letters and the workers that consume; ``mneme
consuming NODE``: the workers' healthcheck."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from workers.celery_app import QUEUES
from workers.cli.ops import FAILED, Ops, handled


@handled
def status(ctx: typer.Context) -> None:
    """Health of every backend, queue depths, pending jobs, dead letters and the workers that consume."""
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

    within = mneme.settings.stage_stall_after_s
    consuming = mneme.state.broker.consuming(within) if health["redis"] == "ok" else []
    silent = mneme.state.broker.silent(within) if health["redis"] == "ok" else {}
    workers = Table("worker", "state", title="workers (consuming: took and finished work in the last "
                                               f"{within:.0f} s, not only answered a ping)")
    for node in consuming:
        workers.add_row(node, "[green]consuming[/green]")
    for node, quiet_s in sorted(silent.items()):
        workers.add_row(node, f"[red]not consuming for {quiet_s:.0f} s[/red]")
    ops.out.print(workers if consuming or silent else "[red]no worker has consumed yet[/red]")
    if any(state != "ok" for state in health.values()) or not consuming:
        raise typer.Exit(FAILED)


@handled
def consuming(ctx: typer.Context,
              node: Annotated[str, typer.Argument(help="A worker node (pipeline@host), or @host for any of a host's.")]
              ) -> None:
    """Exit 0 when the worker ``node`` consumes (its consumer connected, its loop running, within the stall
    threshold), else say why and exit 1: the workers' healthcheck (docker-compose), not a ping a stuck worker
    still answers."""
    ops: Ops = ctx.obj
    mneme = ops.mneme
    within = mneme.settings.stage_stall_after_s
    mine = [n for n in mneme.state.broker.consuming(within) if n == node or (node.startswith("@") and n.endswith(node))]
    if not mine:
        quiet = {n: s for n, s in mneme.state.broker.silent(within).items() if n == node or n.endswith(node)}
        ops.err.print(f"{node}: not consuming" + (f" for {max(quiet.values()):.0f} s" if quiet else " (never beat)"),
                      markup=False)
        raise typer.Exit(FAILED)
    ops.out.print(", ".join(mine) + ": consuming")
