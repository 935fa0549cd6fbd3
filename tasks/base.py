"""What every Mneme task shares: retry with backoff on transient errors only; a final failure becomes a
dead letter (``memory.state.deadletters``) and is written to the job so the client sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import Task

from memory.errors import TransientError, described
from memory.mneme import get_mneme

if TYPE_CHECKING:
    from billiard.einfo import ExceptionInfo

    _Task = Task[Any, Any]  # generic in celery-types' stubs only: celery's Task cannot be subscripted
else:
    _Task = Task


class MnemeTask(_Task):
    autoretry_for = (TransientError,)
    retry_backoff = True
    retry_backoff_max = 60
    retry_jitter = True
    stage = "task"

    @property
    def max_retries(self) -> int:  # type: ignore[override]
        return get_mneme().settings.task_max_retries

    def on_failure(self, exc: Exception, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   einfo: ExceptionInfo) -> None:
        mneme, job_id = get_mneme(), kwargs.get("job_id")
        owner = mneme.state.jobs.owner(job_id) if job_id else None
        if owner is None and isinstance(kwargs.get("tenant"), str) and isinstance(kwargs.get("user_id"), str):
            owner = (kwargs["tenant"], kwargs["user_id"])  # memory.retract
        mneme.state.dead_letters.push(
            task_id=task_id, task=self.name, queue=(self.request.delivery_info or {}).get("routing_key"), args=args,
            kwargs=kwargs, error=exc, traceback=str(einfo), retries=self.request.retries, job_id=job_id, owner=owner)
        if job_id:
            mneme.state.jobs.fail(job_id, self.stage, f"{type(exc).__name__}: {described(exc)}")
