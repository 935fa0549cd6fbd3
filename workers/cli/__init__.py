"""``mneme``: the operator's command line (``python -m workers.cli`` works too).

    mneme status                               backends, queue depths, pending jobs, dead letters, workers
    mneme dead list|show|replay|drop           the dead-letter queue (``memory.state.deadletters``)
    mneme erase USER_ID --yes                  erase a user everywhere and print the receipt
    mneme audit verify [PATH]                  check the audit file's hash chain (exit 0 intact, 1 not)
    mneme run decay|archive|noise|compact|sweep|redrive   run a maintenance job here and now
    mneme export USER_ID [--out FILE]          everything kept about one user, decrypted (GDPR access)
    mneme keys create|list|revoke              API keys (``memory.state.tenants``)

Settings come from the environment (``MNEME_*``) on every invocation — never from a cached object — and
``--data-dir`` overrides ``MNEME_DATA_DIR``. Without ``MNEME_REDIS_URL`` the stack running from the data dir
(``make run`` writes ``<data_dir>/stack.json``) is found there: its Redis, and every setting it runs with that
this environment does not set itself. A command that needs a deployment and finds none says which data dir it
looked in and how to point it elsewhere, and exits 1 having created nothing: the CLI opens a deployment's master
key and stores, never new ones. Reports and documents go to stdout (JSON where a program may read them);
progress bars and messages go to stderr.

This module only assembles the app: :mod:`~workers.cli.ops` holds what every command shares, and each
command or group of commands has its own module (``status``, ``dead``, ``userdata``, ``audit``, ``run``,
``keys``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workers.cli import audit, dead, keys, run, status, userdata
from workers.cli.ops import Ops, find_settings

__all__ = ["app"]

app = typer.Typer(name="mneme", help="Operate a Mneme deployment.", no_args_is_help=True, add_completion=False)
app.add_typer(dead.app, name="dead")
app.add_typer(audit.app, name="audit")
app.add_typer(keys.app, name="keys")


@app.callback()
def main(ctx: typer.Context,
         data_dir: Annotated[Path | None, typer.Option(help="Overrides MNEME_DATA_DIR.")] = None) -> None:
    ops = Ops(*find_settings(data_dir))
    ctx.obj = ops
    ctx.call_on_close(ops.close)


app.command()(status.status)
app.command()(status.consuming)
app.command()(userdata.erase)
app.command("run")(run.run_job)
app.command()(userdata.export)
