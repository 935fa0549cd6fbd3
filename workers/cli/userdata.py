"""``mneme export`` and ``mneme erase``: one user's data, all of it handed over (GDPR access) or erased."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from memory.mneme import Mneme
from memory.progress import Tick
from memory.services.reads import Reader
from workers.cli.ops import FAILED, USAGE, Ops, handled


@handled
def export(ctx: typer.Context, user_id: str,
           tenant: Annotated[str | None, typer.Option(help="Default: MNEME_TENANT.")] = None,
           out: Annotated[Path | None, typer.Option(help="Write here (mode 0600) instead of stdout.")] = None) -> None:
    """Everything kept about one user as one JSON document, decrypted where the user's key still exists."""
    ops: Ops = ctx.obj
    mneme = ops.mneme  # no deployment: said before a progress bar starts
    with ops.ticking(f"export {user_id}: stores", "stores") as tick:
        document = export_user(mneme, tenant or ops.settings.tenant, user_id, tick)
    if out is None:
        ops.json(document)
        return
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # personal data: owner only
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(document, fh, ensure_ascii=False, indent=2, default=str)
    ops.err.print(f"wrote {out}: {len(document['sessions'])} sessions, {len(document['episodic_events'])} events, "
                  f"{len(document['archive_objects'])} archived events, {len(document['graph_relations'])} beliefs")


def export_user(mneme: Mneme, tenant: str, user_id: str, tick: Tick | None = None) -> dict[str, Any]:
    """One user's data from every store (``Privacy.export``), recorded as read by the CLI."""
    document = mneme.privacy.export(tenant, user_id, tick)
    mneme.reads.exported(Reader(tenant, "cli", via="cli"), user_id, mneme.privacy.verify(tenant, user_id))
    return document


@handled
def erase(ctx: typer.Context, user_id: str,
          tenant: Annotated[str | None, typer.Option(help="Default: MNEME_TENANT.")] = None,
          yes: Annotated[bool, typer.Option("--yes", help="Confirm: erasure cannot be undone.")] = False,
          operator: Annotated[str, typer.Option(help="Recorded in the audit trail.")] = "ops-cli") -> None:
    """Erase a user from every store and print the receipt; exit 1 if anything remains."""
    ops: Ops = ctx.obj
    if not yes:
        ops.err.print(f"refusing to erase {user_id!r} without --yes: erasure cannot be undone")
        raise typer.Exit(USAGE)
    receipt = ops.mneme.privacy.erase(tenant or ops.settings.tenant, user_id, operator)
    ops.json(receipt.model_dump(mode="json"))
    if not receipt.complete:
        raise typer.Exit(FAILED)
