"""What a family of findings declares: its codes, each code's severity, its docs anchor and its check.

A check runs once per run, once per arm or once per operating point (its ``Scope``); the judge
(:mod:`specbench.analysis.findings.judge`) runs the families in one fixed order, consecutive
families of one scope together, so findings come out in the order a reader has always seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from specbench.analysis.findings.gather import PointEvidence, RunEvidence
from specbench.analysis.findings.model import Finding, Severity

DOCS = "docs/checks.md"


@dataclass(frozen=True)
class Family:
    """``severity``: each code's severity by its rule in docs/checks.md (where a finding's own
    evidence can raise or lower it, the check says so); ``anchor``: the section there."""

    codes: type[StrEnum]
    severity: Mapping[Any, Severity]  # keyed by ``codes``' members (a Mapping's key is invariant)
    anchor: str

    @property
    def docs(self) -> str:
        return f"{DOCS}#{self.anchor}"


@dataclass(frozen=True)
class RunFamily(Family):
    check: Callable[[RunEvidence], list[Finding]]


@dataclass(frozen=True)
class ArmFamily(Family):
    check: Callable[[RunEvidence, str], list[Finding]]


@dataclass(frozen=True)
class PointFamily(Family):
    check: Callable[[PointEvidence], list[Finding]]


AnyFamily = RunFamily | ArmFamily | PointFamily
