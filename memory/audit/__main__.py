"""``python -m memory.audit verify [PATH]``: check an audit file's hash chain.

Prints a one-line verdict and exits 0 if the chain is intact, 1 if it is not, 2 on a usage error (bad
arguments, no such file, or no PATH while the configured audit sink is not a file). PATH defaults to the
settings' audit file (``MNEME_AUDIT_URL``, else ``MNEME_DATA_DIR/audit.jsonl``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory.audit.file import verify
from memory.errors import MnemeError
from memory.settings import get_settings

INTACT, BROKEN, USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory.audit", description="Audit trail tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verify", help="check the hash chain of an audit file")
    check.add_argument("path", nargs="?", help="the audit file (default: the settings' audit file)")
    args = parser.parse_args(argv)  # exits with USAGE on bad arguments
    try:
        report = verify(Path(args.path.removeprefix("file://")) if args.path else _configured_file())
    except MnemeError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return USAGE
    print(report.summary())
    return INTACT if report.ok else BROKEN


def _configured_file() -> Path:
    url = get_settings().audit
    if not url.startswith("file://"):
        raise MnemeError(f"the configured audit sink is {url.split('://', 1)[0]}://, not a file: pass PATH")
    return Path(url.removeprefix("file://"))


if __name__ == "__main__":
    sys.exit(main())
