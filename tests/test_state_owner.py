"""One owner for Redis state: no module of Mneme outside ``memory/state/`` imports the Redis client library or
reaches for the raw client (``….state.client``); everything kept in Redis goes through a repository there."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("memory", "tasks", "workers")
#: modules that talk to Redis servers, not to Mneme's state, and why
SERVER_TOOLS = {"workers/local/cluster.py": "forms a cluster of the servers it started (CLUSTER MEET, ADDSLOTS …)"}


def _modules_outside_state() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    return [p for p in files if (ROOT / "memory" / "state") not in p.parents
            and str(p.relative_to(ROOT)) not in SERVER_TOOLS]


def _raw_redis_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("redis", "valkey") for a in node.names):
            found.append(f"line {node.lineno}: import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("redis", "valkey"):
            found.append(f"line {node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Attribute) and node.attr == "client" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "state":
            found.append(f"line {node.lineno}: ….state.client")
        elif isinstance(node, ast.Attribute) and node.attr == "redis" and isinstance(node.value, ast.Name) \
                and node.value.id in ("rt", "runtime"):
            found.append(f"line {node.lineno}: {node.value.id}.redis")
    return found


def test_nothing_outside_memory_state_touches_a_raw_redis_client():
    offenders = {str(p.relative_to(ROOT)): uses for p in _modules_outside_state() if (uses := _raw_redis_uses(p))}
    assert not offenders, f"go through a repository in memory/state/ instead: {offenders}"


def test_the_scan_sees_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    raw = "rt." + "redis"  # spelled apart, so a search-and-replace over the tests cannot change the sample
    sample.write_text(f"import redis\nfrom redis.client import Pipeline\nrt.state.client.get('k')\n{raw}.get('k')\n")
    assert len(_raw_redis_uses(sample)) == 4
