"""Mneme's Lua, as files, each Redis step one script: the job record (``jobs.lua``, the one place that writes
it), product counters (``counters.lua``), working memory (``sessions.lua``, whose accept step calls the
other two; ``vectors.lua`` keeps a session's newest turn's vector), dead letters (``deadletters.lua``) and an
API key's rate window (``ratelimit.lua``). A script is the files whose functions it needs, then its entry."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def source(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def script(*files: str, entry: str = "") -> str:
    return "\n".join([*(source(f) for f in files), entry])
