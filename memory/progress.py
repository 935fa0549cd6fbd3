"""How a long job tells its caller how far it got: ``tick(done, total)`` after each step (a user, a batch of
beliefs, a store). The CLI draws it as a progress bar with counts and rate; the beat tasks pass none."""

from __future__ import annotations

from collections.abc import Callable

Tick = Callable[[int, int], None]
