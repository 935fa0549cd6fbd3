"""``mneme audit verify``: check the audit file's hash chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memory.audit import verify
from memory.errors import NotFound
from workers.cli.ops import FAILED, USAGE, Ops, handled

app = typer.Typer(help="The audit trail.", no_args_is_help=True)


@app.command("verify")
@handled
def audit_verify(ctx: typer.Context, path: Annotated[str | None, typer.Argument(
        help="The audit file (default: the configured one).")] = None) -> None:
    """Check the audit file's hash chain: exit 0 if intact, 1 if not, 2 if there is nothing to check."""
    ops: Ops = ctx.obj
    if path is None:
        url = ops.settings.audit
        if not url.startswith("file://"):
            ops.err.print(f"the configured audit sink is {url.split('://', 1)[0]}://, not a file: pass PATH")
            raise typer.Exit(USAGE)
        path = url
    try:
        report = verify(Path(path.removeprefix("file://")))
    except NotFound as exc:
        ops.err.print(f"error: {exc.message}")
        raise typer.Exit(USAGE) from None
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(FAILED)
