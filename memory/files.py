"""Files that hold user data are the owner's only: directories 0700, files 0600."""

from __future__ import annotations

from pathlib import Path


def private_dir(path: Path) -> Path:
    """``path`` and every missing parent created 0700 (``mkdir(parents=True)`` gives parents the default)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    return missing[0] if missing else path
