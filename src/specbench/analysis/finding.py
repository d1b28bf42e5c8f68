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
    """``point``: the operating point a statistical finding was computed at, when the run sweeps
    (issue 40: DRIFT, BIMODAL, UNSTABLE, STALLED never pool a sweep's levels); "" for the run."""

    code: str
    arms: tuple[str, ...]
    evidence: str
    severity: str = "warning"
    point: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def at_point(found: list[Finding], point: str) -> list[Finding]:
    """The findings that bear on operating point ``point``: the run's own and that point's."""
    return [f for f in found if f.point in ("", point)]


@dataclass(frozen=True)
class FindingGroup:
    """Every finding of one code and severity as one line (issue 28: three ``BUSY_MACHINE``
    lines, one per arm, pushed the answer down): the arms it names, in first-seen order, and each
    finding's own evidence, none dropped."""

    code: str
    severity: str
    arms: tuple[str, ...]
    evidence: tuple[str, ...]

    @property
    def line(self) -> str:
        """ "CODE (a, b): evidence" — one evidence sentence, then how many more there are."""
        more = f" (+{len(self.evidence) - 1} more like it)" if len(self.evidence) > 1 else ""
        return f"{self.code} ({', '.join(self.arms)}): {self.evidence[0]}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "arms": list(self.arms),
                "evidence": list(self.evidence)}  # fmt: skip


def group_findings(found: list[Finding]) -> list[FindingGroup]:
    """One group per (code, severity), most serious first, in the order the findings came."""
    groups: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for f in found:
        arms, evidence = groups.setdefault((f.code, f.severity), ([], []))
        arms += [a for a in f.arms if a not in arms]
        if f.evidence not in evidence:
            evidence.append(f.evidence)
    out = [FindingGroup(code, sev, tuple(arms), tuple(ev)) for (code, sev), (arms, ev) in groups.items()]
    return sorted(out, key=lambda g: SEVERITY_ORDER.get(g.severity, 3))
