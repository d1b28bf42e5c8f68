"""The finding model: a code, the arm(s), one sentence of evidence and a severity.

Severity means consequence (docs/checks.md gives each code's rule in one line):
``error`` — the arm did not measure what it claims, it is never recommended; ``warning`` — a
number a reader could misread without the sentence; ``info`` — context.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    code: str
    arms: tuple[str, ...]
    evidence: str
    severity: str = "warning"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
