"""Findings as the report shows them: every finding of one code and severity on one line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.analysis.findings.model import SEVERITY_ORDER, Finding


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
        return {"code": str(self.code), "severity": str(self.severity), "arms": list(self.arms),
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
