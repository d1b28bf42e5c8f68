"""The finding model: a code, the arm(s), one sentence of evidence and a severity.

Severity means consequence (docs/checks.md gives each code's rule in one line):
``error`` — the arm did not measure what it claims, it is never recommended; ``warning`` — a
number a reader could misread without the sentence; ``info`` — context. Each code is a member of
its family's enum (one module of this package per family); both enums are ``str``-valued, so a
finding compares, hashes and serialises as the bare code it always was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    """``point``: the operating point a statistical finding was computed at, when the run sweeps
    (issue 40: DRIFT, BIMODAL, UNSTABLE, STALLED never pool a sweep's levels); "" for the run."""

    code: str
    arms: tuple[str, ...]
    evidence: str
    severity: str = Severity.WARNING
    point: str = ""

    def to_dict(self) -> dict[str, Any]:
        # plain strings, not enum members: findings.json is read by tools that know no enum
        return {**asdict(self), "code": str(self.code), "severity": str(self.severity)}


SEVERITY_ORDER: dict[str, int] = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def by_severity(found: list[Finding]) -> list[Finding]:
    """Most serious first; a stable sort, so findings of one severity keep the order they came in."""
    return sorted(found, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def at_point(found: list[Finding], point: str) -> list[Finding]:
    """The findings that bear on operating point ``point``: the run's own and that point's."""
    return [f for f in found if f.point in ("", point)]
