"""Purpose-bound consent: what a user consented to, purpose by purpose, and what each memory may serve.

A user grants long-term memory per purpose (``MNEME_PURPOSES``: personalisation, tutoring, support,
analytics by default). Each grant of a purpose is numbered: the n-th time it was granted. A memory — an
episodic row (either tier), a piece of graph evidence, an archived event — records the grants in force when
it was collected, as tokens ``<purpose>#<n>`` ("tutoring#2"). It serves a purpose only while that very grant
stands: withdrawing the purpose ends grant n, granting it again starts grant n + 1, so nothing collected
before a withdrawal serves the purpose again, and nothing needs rewriting when a purpose is withdrawn.

``ANY`` ("*") is what a memory collected before purposes were recorded holds: it stands for the first grant of
every purpose — a consent given before purposes existed was a consent to all of them, and its data serves
each purpose until that purpose is first withdrawn.

``Grants`` is a user's consent as the policy holds it: purpose → n (granted: its n-th grant) or -n (withdrawn
after its n-th grant); a purpose never granted is absent.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from memory.errors import InvalidInput

ANY = "*"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
DEFAULT_PURPOSES = ("personalisation", "tutoring", "support", "analytics")


def token(purpose: str, grant: int) -> str:
    return f"{purpose}#{grant}"


def purpose_of(recorded: str) -> str:
    """The purpose a recorded token names ("tutoring#2" → "tutoring"; ``ANY`` stays itself)."""
    return recorded.split("#", 1)[0]


def checked(purposes: Iterable[str], known: Collection[str]) -> list[str]:
    """Purposes named by a caller, each one of ``known``, sorted and without repeats; else ``InvalidInput``."""
    named = sorted(set(purposes))
    unknown = [p for p in named if p not in known]
    if unknown:
        raise InvalidInput(f"unknown purpose(s) {unknown}: this deployment's purposes are {sorted(known)} "
                           "(MNEME_PURPOSES)")
    return named


@dataclass(frozen=True)
class Grants:
    """A user's consent per purpose (see the module's text): purpose → n (granted) or -n (withdrawn)."""

    numbers: Mapping[str, int] = field(default_factory=dict)

    @property
    def granted(self) -> list[str]:
        return sorted(p for p, n in self.numbers.items() if n > 0)

    @property
    def withdrawn(self) -> list[str]:
        return sorted(p for p, n in self.numbers.items() if n < 0)

    def collected(self) -> list[str]:
        """The tokens a memory collected now records: every grant in force."""
        return sorted(token(p, n) for p, n in self.numbers.items() if n > 0)

    def serving(self, purpose: str | None = None) -> list[str]:
        """The tokens a memory must hold one of to serve ``purpose`` now (None: any purpose granted); empty if
        the purpose is not granted."""
        wanted = self.granted if purpose is None else [purpose] if self.numbers.get(purpose, 0) > 0 else []
        tokens = [token(p, self.numbers[p]) for p in wanted]
        if any(self.numbers[p] == 1 for p in wanted):
            tokens.append(ANY)
        return sorted(tokens)

    def serves(self, recorded: Collection[str], purpose: str | None = None) -> bool:
        return not set(recorded).isdisjoint(self.serving(purpose))

    def purposes_of(self, recorded: Collection[str]) -> list[str]:
        """The purposes a memory recorded under ``recorded`` serves now."""
        return sorted(p for p in self.granted if self.serves(recorded, p))
