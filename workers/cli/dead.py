"""``mneme dead list|show|replay|drop``: the dead-letter queue (``memory.state.deadletters``)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memory.errors import InvalidInput, NotFound
from memory.state.deadletters import DeadLetter, DeadLetters
from workers.cli.ops import FAILED, USAGE, Ops, handled, utc_time

app = typer.Typer(help="Tasks that failed for good, kept with their payload and error.", no_args_is_help=True)


@app.command("list")
@handled
def dead_list(ctx: typer.Context, limit: Annotated[int, typer.Option(min=1)] = 20,
              offset: Annotated[int, typer.Option(min=0)] = 0,
              as_json: Annotated[bool, typer.Option("--json", help="One JSON entry per line.")] = False) -> None:
    """Dead letters, newest first."""
    ops: Ops = ctx.obj
    letters = ops.mneme.state.dead_letters.list(limit, offset)
    if as_json:
        for letter in letters:
            typer.echo(letter.model_dump_json())
        return
    table = Table(title=f"dead letters {offset + 1 if letters else 0}–{offset + len(letters)} "
                        f"of {ops.mneme.state.dead_letters.size()}",
                  caption="`mneme dead show ID`: payload, whole error, traceback")
    table.add_column("id", no_wrap=True, min_width=36)  # what `dead show|replay|drop` take: never cut
    table.add_column("task", no_wrap=True, min_width=14)
    table.add_column("failed at (UTC)", no_wrap=True, min_width=19)
    table.add_column("tries", no_wrap=True, min_width=5)
    table.add_column("error", ratio=1)
    for d in letters:
        first_line = (d.error_message.splitlines() or [""])[0]
        table.add_row(d.id, d.task, utc_time(d.failed_at), str(d.retries + 1), f"{d.error_type}: {first_line}")
    ops.out.print(table)


@app.command("show")
@handled
def dead_show(ctx: typer.Context, letter_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """One dead letter as JSON: payload, error, traceback."""
    ops: Ops = ctx.obj
    ops.json(ops.mneme.state.dead_letters.get(letter_id).model_dump(mode="json"))


@app.command("replay")
@handled
def dead_replay(ctx: typer.Context, letter_id: Annotated[str | None, typer.Argument(metavar="ID")] = None,
                replay_all: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False) -> None:
    """Send a dead letter's task again (with its stored arguments); it leaves the list once sent."""
    ops: Ops = ctx.obj
    letters = ops.mneme.state.dead_letters
    if (letter_id is None) == (not replay_all):
        ops.err.print("give one dead letter ID or --all")
        raise typer.Exit(USAGE)
    if letter_id is not None:
        letter = letters.replay(letter_id, ops.send)
        ops.out.print(f"replayed {letter.id} ({letter.task}); a new failure lands in the list again")
        return
    ids = [d.id for d in _all_letters(letters)][::-1]  # oldest first
    replayed = gone = 0
    skipped: list[str] = []
    with ops.progress() as progress:
        bar = progress.add_task("replaying", total=len(ids))
        for one in ids:
            try:
                letters.replay(one, ops.send)
                replayed += 1
            except NotFound:  # replayed or dropped by someone else meanwhile
                gone += 1
            except InvalidInput:  # not replayable as stored: stays for `dead show` / `dead drop`
                skipped.append(one)
            progress.advance(bar)
    ops.out.print(f"replayed {replayed} dead letters" + (f" ({gone} were already gone)" if gone else ""))
    if skipped:
        ops.err.print(f"not replayable (positional arguments), kept: {', '.join(skipped)}")
        raise typer.Exit(FAILED)


def _all_letters(letters: DeadLetters, page: int = 1000) -> list[DeadLetter]:
    out: list[DeadLetter] = []
    while batch := letters.list(page, len(out)):
        out += batch
    return out


@app.command("drop")
@handled
def dead_drop(ctx: typer.Context, letter_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Delete a dead letter without replaying it."""
    ops: Ops = ctx.obj
    if not ops.mneme.state.dead_letters.remove(letter_id):
        raise NotFound(f"no dead letter {letter_id!r}")
    ops.out.print(f"dropped {letter_id}")
