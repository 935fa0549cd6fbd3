"""``mneme``: the operator's command line (``python -m workers.cli`` works too).

    mneme status                               backends, queue depths, pending jobs, dead letters, workers
    mneme dead list|show|replay|drop           the dead-letter queue (``memory.deadletters``)
    mneme erase USER_ID --yes                  erase a user everywhere and print the receipt
    mneme audit verify [PATH]                  check the audit file's hash chain (exit 0 intact, 1 not)
    mneme run decay|archive|noise|compact|sweep|redrive   run a maintenance job here and now
    mneme export USER_ID [--out FILE]          everything kept about one user, decrypted (GDPR access)
    mneme keys create|list|revoke              API keys (``memory.tenants``)

Settings come from the environment (``MNEME_*``) on every invocation — never from a cached object — and
``--data-dir`` overrides ``MNEME_DATA_DIR``. Without ``MNEME_REDIS_URL`` the stack running from the data dir
(``make run`` writes ``<data_dir>/stack.json``) is found there: its Redis, and every setting it runs with that
this environment does not set itself. Reports and documents go to stdout (JSON where a program may read them);
progress bars and messages go to stderr.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from celery import Celery
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from memory import deadletters, erasure, keys, maintenance, pipeline, tenants, userdata
from memory.audit import layer_records, verify
from memory.errors import InvalidInput, MnemeError, NotFound
from memory.runtime import Runtime
from memory.settings import Settings
from tasks.maintenance import lost_jobs
from workers.celery_app import QUEUES, create_celery
from workers.stack import find_running, state_path

app = typer.Typer(name="mneme", help="Operate a Mneme deployment.", no_args_is_help=True, add_completion=False)
dead_app = typer.Typer(help="Tasks that failed for good, kept with their payload and error.", no_args_is_help=True)
audit_app = typer.Typer(help="The audit trail.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys: each maps a caller to one tenant.", no_args_is_help=True)
app.add_typer(dead_app, name="dead")
app.add_typer(audit_app, name="audit")
app.add_typer(keys_app, name="keys")

OK, FAILED, USAGE = 0, 1, 2


class Ops:
    """What one invocation needs, built on first use from fresh settings and closed at exit."""

    def __init__(self, settings: Settings, note: str = "") -> None:
        self.settings = settings
        self.note = note  # why no running stack was found: said once, when a command needs Redis
        self.out = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False)
        self._runtime: Runtime | None = None
        self._celery: Celery | None = None

    def _say_note(self) -> None:
        if self.note:
            self.err.print(self.note, markup=False, soft_wrap=True)
            self.note = ""

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._say_note()
            self._runtime = Runtime(self.settings)
        return self._runtime

    @property
    def celery(self) -> Celery:
        if self._celery is None:
            self._say_note()
            self._celery = create_celery(self.settings)
        return self._celery

    def send(self, task: str, kwargs: dict[str, Any]) -> None:
        self.celery.send_task(task, kwargs=kwargs)

    def json(self, document: Any) -> None:
        """Plain JSON on stdout (no wrapping, no markup), so it can be piped."""
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2, default=str))

    def progress(self) -> Progress:
        return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.err)

    def close(self) -> None:
        if self._celery is not None:
            self._celery.close()
        if self._runtime is not None and "redis" in self._runtime.__dict__:
            self._runtime.redis.close()


@app.callback()
def main(ctx: typer.Context,
         data_dir: Annotated[Path | None, typer.Option(help="Overrides MNEME_DATA_DIR.")] = None) -> None:
    ops = Ops(*find_settings(data_dir))
    ctx.obj = ops
    ctx.call_on_close(ops.close)


def find_settings(data_dir: Path | None = None) -> tuple[Settings, str]:
    """This invocation's settings, and why no running stack was found ('' when one was, or none is needed).

    An explicit ``MNEME_REDIS_URL`` wins; without it the stack's state file in the data dir supplies its Redis
    and the settings it runs with (its stores, tenant…), under whatever this environment sets itself."""
    given = Settings(**({"data_dir": data_dir} if data_dir else {}))
    if given.redis_url:
        return given, ""
    state, why = find_running(given.data_dir)
    if state is None:
        return given, why or (f"no running stack found: {state_path(given.data_dir).absolute()} does not exist; "
                              f"start it with `make run`, pass --data-dir, or set MNEME_REDIS_URL")
    own = {name: getattr(given, name) for name in given.model_fields_set if name != "redis_url"}
    try:
        return Settings(**{**state.settings, **own, "redis_url": state.redis_url}), ""
    except ValidationError as exc:  # a file written by another version of Mneme
        return given, f"ignoring {state.path}: its settings are not valid here ({exc.error_count()} errors)"


def handled(fn: Callable[..., None]) -> Callable[..., None]:
    """Mneme's own errors end the command with their message and exit 1, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except MnemeError as exc:
            Console(stderr=True, highlight=False).print(f"[red]error:[/red] {exc.message}")
            raise typer.Exit(FAILED) from None

    return wrapper


def _ts(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


# --- status ---------------------------------------------------------------------------------------

@app.command()
@handled
def status(ctx: typer.Context) -> None:
    """Health of every backend, queue depths, pending jobs, dead letters and the workers that answer."""
    ops: Ops = ctx.obj
    rt = ops.runtime
    health = rt.health()
    health.pop("embedder", None)  # loaded by the embed worker, never by this process: its ping below says more
    backends = Table("backend", "state", title="backends")
    for name, state in health.items():
        backends.add_row(name, "[green]ok[/green]" if state == "ok" else f"[red]{state}[/red]")
    ops.out.print(backends)

    if health["redis"] == "ok":
        pipe = rt.redis.pipeline()
        for queue in QUEUES:
            pipe.llen(queue)
        pipe.hlen("unacked")  # kombu's Redis transport keeps late-ack messages in flight here
        pipe.zcard(keys.PENDING)
        pipe.llen(keys.DEAD_LETTERS)
        *depths, in_flight, pending, dead = pipe.execute()
        queues = Table("queue", "depth", title="queues")
        for queue, depth in zip(QUEUES, depths, strict=True):
            queues.add_row(queue, str(depth))
        queues.add_row("(in flight, unacked)", str(in_flight))
        ops.out.print(queues)
        ops.out.print(f"pending jobs: {pending}")
        ops.out.print(f"dead letters: {dead}" + ("  (see `mneme dead list`)" if dead else ""))

    try:
        replies = ops.celery.control.ping(timeout=1.0)
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


# --- dead letters ---------------------------------------------------------------------------------

@dead_app.command("list")
@handled
def dead_list(ctx: typer.Context, limit: Annotated[int, typer.Option(min=1)] = 20,
              offset: Annotated[int, typer.Option(min=0)] = 0,
              as_json: Annotated[bool, typer.Option("--json", help="One JSON entry per line.")] = False) -> None:
    """Dead letters, newest first."""
    ops: Ops = ctx.obj
    letters = deadletters.list(ops.runtime.redis, limit, offset)
    if as_json:
        for letter in letters:
            typer.echo(letter.model_dump_json())
        return
    table = Table(title=f"dead letters {offset + 1 if letters else 0}–{offset + len(letters)} "
                        f"of {deadletters.count(ops.runtime.redis)}",
                  caption="`mneme dead show ID`: payload, whole error, traceback")
    table.add_column("id", no_wrap=True, min_width=36)  # what `dead show|replay|drop` take: never cut
    table.add_column("task", no_wrap=True, min_width=14)
    table.add_column("failed at (UTC)", no_wrap=True, min_width=19)
    table.add_column("tries", no_wrap=True, min_width=5)
    table.add_column("error", ratio=1)
    for d in letters:
        first_line = (d.error_message.splitlines() or [""])[0]
        table.add_row(d.id, d.task, _ts(d.failed_at), str(d.retries + 1), f"{d.error_type}: {first_line}")
    ops.out.print(table)


@dead_app.command("show")
@handled
def dead_show(ctx: typer.Context, letter_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """One dead letter as JSON: payload, error, traceback."""
    ops: Ops = ctx.obj
    ops.json(deadletters.get(ops.runtime.redis, letter_id).model_dump(mode="json"))


@dead_app.command("replay")
@handled
def dead_replay(ctx: typer.Context, letter_id: Annotated[str | None, typer.Argument(metavar="ID")] = None,
                replay_all: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False) -> None:
    """Send a dead letter's task again (with its stored arguments); it leaves the list once sent."""
    ops: Ops = ctx.obj
    redis = ops.runtime.redis
    if (letter_id is None) == (not replay_all):
        ops.err.print("give one dead letter ID or --all")
        raise typer.Exit(USAGE)
    if letter_id is not None:
        letter = deadletters.replay(redis, letter_id, ops.send)
        ops.out.print(f"replayed {letter.id} ({letter.task}); a new failure lands in the list again")
        return
    ids = [d.id for d in _all_letters(redis)][::-1]  # oldest first
    replayed = gone = 0
    skipped: list[str] = []
    with ops.progress() as progress:
        bar = progress.add_task("replaying", total=len(ids))
        for one in ids:
            try:
                deadletters.replay(redis, one, ops.send)
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


def _all_letters(redis, page: int = 1000) -> list[deadletters.DeadLetter]:
    out: list[deadletters.DeadLetter] = []
    while batch := deadletters.list(redis, page, len(out)):
        out += batch
    return out


@dead_app.command("drop")
@handled
def dead_drop(ctx: typer.Context, letter_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Delete a dead letter without replaying it."""
    ops: Ops = ctx.obj
    if not deadletters.remove(ops.runtime.redis, letter_id):
        raise NotFound(f"no dead letter {letter_id!r}")
    ops.out.print(f"dropped {letter_id}")


# --- erasure and audit ----------------------------------------------------------------------------

@app.command()
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
    receipt = erasure.erase_user(ops.runtime, tenant or ops.settings.tenant, user_id, operator)
    ops.json(receipt.model_dump(mode="json"))
    if not receipt.complete:
        raise typer.Exit(FAILED)


@audit_app.command("verify")
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


# --- maintenance ----------------------------------------------------------------------------------

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
PER_USER = {Job.archive: maintenance.archive_user, Job.noise: maintenance.downweight_noise,
            Job.compact: maintenance.compact_user}


@app.command("run")
@handled
def run_job(ctx: typer.Context, task: Job,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; change nothing.")]
            = False,
            limit: Annotated[int | None, typer.Option(min=1)] = None,
            batch_size: Annotated[int | None, typer.Option(min=1)] = None) -> None:
    """Run a maintenance job in this process now (not through the queue) and print its report."""
    ops: Ops = ctx.obj
    rt = ops.runtime
    limit = limit or DEFAULTS[task][0]
    batch_size = batch_size or DEFAULTS[task][1]
    if task in PER_USER:
        report = _per_user(ops, PER_USER[task], task.value, dry_run, limit, batch_size)
    elif task is Job.decay:
        with ops.err.status("decaying beliefs…"):
            report, records = pipeline.decay_stage(rt, dry_run=dry_run, limit=limit, batch_size=batch_size)
        rt.audit.write(records)  # in process: straight to the sink, not through the audit queue
    elif task is Job.sweep:
        with ops.err.status("verifying erasures…"):
            report = erasure.sweep(rt, dry_run=dry_run, limit=limit, batch_size=batch_size)
    else:
        report = _redrive(ops, dry_run, limit)
    ops.json({"task": task.value, **report})


def _per_user(ops: Ops, job: Callable, name: str, dry_run: bool, limit: int, batch_size: int) -> dict:
    """``maintenance.run`` with a progress bar: the same job, user by user."""
    rt = ops.runtime
    report, now = maintenance.Report(dry_run=dry_run), time.time()
    with ops.progress() as progress:
        bar = progress.add_task(f"{name}: users", total=None)
        for tenant, user_id in maintenance.each_user(rt, limit, batch_size):
            report.users += 1
            job(rt, tenant, user_id, report, now)
            progress.advance(bar)
        progress.update(bar, total=report.users)
    if records := layer_records(rt.user_hash_key, report.layer):
        rt.audit.write(records)
    return report.model_dump()


def _redrive(ops: Ops, dry_run: bool, limit: int) -> dict:
    """Re-send the jobs the broker lost, as the beat task does (the stages are idempotent)."""
    report = lost_jobs(ops.runtime, ops.celery, limit)
    if not dry_run:
        with ops.progress() as progress:
            for job_id in progress.track(report["job_ids"], description="re-sending"):
                ops.celery.send_task("memory.extract", task_id=job_id, kwargs={"job_id": job_id})
    return {**report, "resent": 0 if dry_run else len(report["job_ids"]), "dry_run": dry_run}


# --- export ---------------------------------------------------------------------------------------

@app.command()
@handled
def export(ctx: typer.Context, user_id: str,
           tenant: Annotated[str | None, typer.Option(help="Default: MNEME_TENANT.")] = None,
           out: Annotated[Path | None, typer.Option(help="Write here (mode 0600) instead of stdout.")] = None) -> None:
    """Everything kept about one user as one JSON document, decrypted where the user's key still exists."""
    ops: Ops = ctx.obj
    document = export_user(ops.runtime, tenant or ops.settings.tenant, user_id)
    if out is None:
        ops.json(document)
        return
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # personal data: owner only
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(document, fh, ensure_ascii=False, indent=2, default=str)
    ops.err.print(f"wrote {out}: {len(document['sessions'])} sessions, {len(document['episodic_events'])} events, "
                  f"{len(document['archive_objects'])} archived events, {len(document['graph_relations'])} beliefs")


def export_user(rt: Runtime, tenant: str, user_id: str) -> dict:
    """One user's data from every store (``memory.userdata.STORES``), each read keyed by (tenant, user)."""
    return {"tenant": tenant, "user_id": user_id, "exported_at": time.time(), **userdata.export(rt, tenant, user_id)}


# --- API keys -------------------------------------------------------------------------------------

@keys_app.command("create")
@handled
def keys_create(ctx: typer.Context, tenant: Annotated[str, typer.Option(help="The tenant the key acts for.")],
                name: Annotated[str, typer.Option(help="A label for operators.")] = "",
                rate_limit: Annotated[int, typer.Option(min=0, help="Requests per minute; 0 = unlimited.")]
                = 600) -> None:
    """Create an API key; the secret is printed once and never stored."""
    ops: Ops = ctx.obj
    key_id, secret = tenants.create_key(ops.runtime.redis, tenant, name, rate_limit)
    ops.out.print(f"key id: {key_id}")
    ops.out.print(f"secret: {secret}", soft_wrap=True)
    ops.err.print("store the secret now: only its hash is kept")


@keys_app.command("list")
@handled
def keys_list(ctx: typer.Context) -> None:
    """Every API key (never a secret)."""
    ops: Ops = ctx.obj
    table = Table("key id", "tenant", "name", "rate limit / min", "created (UTC)", title="API keys")
    for key in tenants.list_keys(ops.runtime.redis):
        table.add_row(key.key_id, key.tenant, key.name, str(key.rate_limit or "unlimited"), _ts(key.created_at))
    ops.out.print(table)


@keys_app.command("revoke")
@handled
def keys_revoke(ctx: typer.Context, key_id: str) -> None:
    """Revoke an API key: requests with it are refused from now on."""
    ops: Ops = ctx.obj
    tenants.revoke_key(ops.runtime.redis, key_id)
    ops.out.print(f"revoked {key_id}")


if __name__ == "__main__":
    app(prog_name="mneme")
