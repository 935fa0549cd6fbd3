"""Waiting for a condition in the tests: poll it, never sleep a fixed time (a busy machine is slower)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def wait_until(check: Callable[[], _T], timeout: float, what: str, interval: float = 0.05) -> _T:
    """``check()`` once it is truthy, asked every ``interval`` s; TimeoutError naming ``what`` after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(interval)
    raise TimeoutError(f"{what}: not after {timeout}s")
