"""The periodic maintenance schedule. Every entry names its queue and an ``expires``: a run that
could not start in time is dropped rather than piling up behind a stalled worker."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from memory.settings import Settings


def schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    every = max(30.0, settings.redrive_after_s / 2)
    return {
        "redrive-stale-jobs": {
            "task": "memory.redrive",
            "schedule": every,
            "kwargs": {"dry_run": False, "limit": 500},
            "options": {"queue": "maintenance", "expires": every * 0.9},
        },
        "decay-beliefs-nightly": nightly("memory.decay", hour=3, minute=0),
        "archive-small-talk-nightly": nightly("memory.archive", hour=3, minute=20),
        "downweight-noise-nightly": nightly("memory.downweight_noise", hour=3, minute=40),
        "compact-events-nightly": nightly("memory.compact", hour=4, minute=0),
        "erasure-sweeper-hourly": {
            "task": "memory.erasure_sweep",
            "schedule": crontab(minute=15),
            "kwargs": {"dry_run": False, "limit": 10_000, "batch_size": 1000},
            "options": {"queue": "maintenance", "expires": 3000},
        },
    }


def nightly(task: str, hour: int, minute: int) -> dict[str, Any]:
    return {
        "task": task,
        "schedule": crontab(hour=hour, minute=minute),
        "kwargs": {"dry_run": False, "limit": 1_000_000, "batch_size": 500},
        "options": {"queue": "maintenance", "expires": 3 * 3600},
    }
