"""``mneme keys create|list|revoke``: API keys (``memory.state.tenants``)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from workers.cli.ops import Ops, handled, utc_time

app = typer.Typer(help="API keys: each maps a caller to one tenant.", no_args_is_help=True)


@app.command("create")
@handled
def keys_create(ctx: typer.Context, tenant: Annotated[str, typer.Option(help="The tenant the key acts for.")],
                name: Annotated[str, typer.Option(help="A label for operators.")] = "",
                rate_limit: Annotated[int, typer.Option(min=0, help="Requests per minute; 0 = unlimited.")]
                = 600) -> None:
    """Create an API key; the secret is printed once and never stored."""
    ops: Ops = ctx.obj
    key_id, secret = ops.mneme.state.api_keys.create_key(tenant, name, rate_limit)
    ops.out.print(f"key id: {key_id}")
    ops.out.print(f"secret: {secret}", soft_wrap=True)
    ops.err.print("store the secret now: only its hash is kept")


@app.command("list")
@handled
def keys_list(ctx: typer.Context) -> None:
    """Every API key (never a secret)."""
    ops: Ops = ctx.obj
    table = Table("key id", "tenant", "name", "rate limit / min", "created (UTC)", title="API keys")
    for key in ops.mneme.state.api_keys.list_keys():
        table.add_row(key.key_id, key.tenant, key.name, str(key.rate_limit or "unlimited"), utc_time(key.created_at))
    ops.out.print(table)


@app.command("revoke")
@handled
def keys_revoke(ctx: typer.Context, key_id: str) -> None:
    """Revoke an API key: requests with it are refused from now on."""
    ops: Ops = ctx.obj
    ops.mneme.state.api_keys.revoke_key(key_id)
    ops.out.print(f"revoked {key_id}")
