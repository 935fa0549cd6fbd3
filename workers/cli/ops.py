"""What every ``mneme`` command shares: :class:`Ops` (settings, Mneme, Celery, output, progress), the
settings lookup (:func:`find_settings`), exit codes and the :func:`handled` decorator."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from celery import Celery
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from memory.errors import MnemeError
from memory.mneme import Mneme
from memory.progress import Tick
from memory.settings import Settings
from workers.celery_app import create_celery
from workers.local.stack import find_running, state_path

OK, FAILED, USAGE = 0, 1, 2


class RateColumn(ProgressColumn):
    """How fast: done per second, in the task's ``unit`` (default items)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed and task.finished and task.elapsed:
            speed = task.completed / task.elapsed
        return Text(f"{speed:,.1f} {task.fields.get('unit', 'items')}/s" if speed else "")


class Ops:
    """What one invocation needs, built on first use from fresh settings and closed at exit. A command that
    needs the deployment (its Redis, its stores) and finds none ends with ``missing`` and exit 1, having
    created nothing."""

    def __init__(self, settings: Settings, missing: str = "") -> None:
        self.settings = settings
        self.missing = missing  # why there is no deployment to operate ('' when there is one)
        self.out = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False)
        self._mneme: Mneme | None = None
        self._celery: Celery | None = None

    def _need(self, what: str) -> None:
        if what:
            self.err.print(f"error: {what}", markup=False, soft_wrap=True)
            raise typer.Exit(FAILED)

    @property
    def mneme(self) -> Mneme:
        if self._mneme is None:
            self._need(self.missing or unmade_state(self.settings))
            self._mneme = Mneme(self.settings)
        return self._mneme

    @property
    def celery(self) -> Celery:
        if self._celery is None:
            self._need(self.missing)
            self._celery = create_celery(self.settings)
        return self._celery

    def send(self, task: str, kwargs: dict[str, Any]) -> None:
        self.celery.send_task(task, kwargs=kwargs)

    def json(self, document: Any) -> None:
        """Plain JSON on stdout (no wrapping, no markup), so it can be piped."""
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2, default=str))

    def progress(self) -> Progress:
        """A progress bar on stderr: what, the bar, done/total, the rate, time spent and left."""
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=self.err)

    @contextmanager
    def ticking(self, description: str, unit: str) -> Iterator[Tick]:
        """A progress bar for a library job that reports ``tick(done, total)`` (``memory.progress``)."""
        with self.progress() as progress:
            bar = progress.add_task(description, total=None, unit=unit)

            def tick(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            yield tick


    def close(self) -> None:
        if self._celery is not None:
            self._celery.close()
        if self._mneme is not None:
            self._mneme.close()


#: How to point the CLI at a deployment, said whenever it finds none.
POINT = ("start one there with `make run`, or point at the data dir of a running one with MNEME_DATA_DIR=DIR (or "
         "`mneme --data-dir DIR …`), or at a deployment's Redis with MNEME_REDIS_URL. Nothing was created")


def find_settings(data_dir: Path | None = None) -> tuple[Settings, str]:
    """This invocation's settings, and why there is no deployment to operate ('' when there is one).

    An explicit ``MNEME_REDIS_URL`` wins; without it the stack's state file in the data dir supplies its Redis
    and the settings it runs with (its stores, tenant…), under whatever this environment sets itself."""
    given = Settings(data_dir=data_dir) if data_dir else Settings()
    if given.redis_url:
        return given, ""
    where = given.data_dir.absolute()
    state, why = find_running(given.data_dir)
    if state is None:
        return given, (f"{why}; {POINT}" if why else
                       f"no running stack found in {where} ({state_path(where)} does not exist): {POINT}")
    own = {name: getattr(given, name) for name in given.model_fields_set if name != "redis_url"}
    try:
        return Settings(**{**state.settings, **own, "redis_url": state.redis_url}), ""
    except ValidationError as exc:  # a file written by another version of Mneme
        return given, f"ignoring {state.path}: its settings are not valid here ({exc.error_count()} errors); {POINT}"


def unmade_state(settings: Settings) -> str:
    """What opening these settings' stores would create ('' when nothing): the CLI operates a deployment's
    master key and stores, and never makes new ones (which would hold nothing, under a key of their own)."""
    data_dir = settings.data_dir.absolute()
    if not settings.master_key and not (data_dir / "master.key").is_file():
        return (f"no master key: MNEME_MASTER_KEY is not set and {data_dir / 'master.key'} does not exist, so "
                f"{data_dir} is not a deployment's data dir: set MNEME_MASTER_KEY to the deployment's key, or "
                f"MNEME_DATA_DIR to its data dir. Nothing was created")
    in_data_dir = not all((settings.episodic_url, settings.graph_url, settings.keys_url, settings.reads_url,
                           settings.audit_url, settings.archive_url))
    if in_data_dir and not data_dir.is_dir():
        return (f"{data_dir} does not exist, and the stores given no URL live there: set MNEME_DATA_DIR to the "
                f"deployment's data dir, or their MNEME_*_URL. Nothing was created")
    return ""


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


def utc_time(ts: float | None) -> str:
    """A timestamp as tables show it (UTC, to the second); ``-`` when there is none."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"
