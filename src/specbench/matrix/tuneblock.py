"""The matrix's ``tune:`` block: a search space, the workloads to tune for, and a budget.

Dimensions are named by what they mean (``draft_n_max``), not by an engine's flag; the engine
seam (:mod:`specbench.engines.tuning`) spells a candidate as arguments. A numeric dimension is a
list (``[2, 4, 8]``) or a range (``{from: 2, to: 16, step: 2}``); refinement may try values
between the grid's points, inside the range the user gave.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Dimensions every engine may know; which of them an engine can spell is the engine's business.
NUMERIC = ("draft_n_max", "draft_n_min", "draft_p_min", "ngram_n", "ngram_m")
TEXT = ("method", "draft_model")
DIMENSIONS = (*TEXT, *NUMERIC)
INTEGER = frozenset({"draft_n_max", "draft_n_min", "ngram_n", "ngram_m"})
MAX_CANDIDATES = 256  # a typo (step 0.0001) is an error, not a race nobody can afford
_NAME = re.compile(r"[^A-Za-z0-9]+")

Value = int | float | str
Candidate = dict[str, Value]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Range(_Frozen):
    """``{from: 2, to: 16, step: 2}``: both ends included."""

    start: float = Field(alias="from")
    to: float
    step: float = Field(gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.to < self.start:
            raise ValueError(f"'to' ({self.to:g}) is below 'from' ({self.start:g})")
        if (self.to - self.start) / self.step > MAX_CANDIDATES:
            raise ValueError(f"more than {MAX_CANDIDATES} values: use a larger step")
        return self

    def values(self) -> list[float]:
        n = round((self.to - self.start) / self.step + 1e-9)
        return [round(self.start + i * self.step, 10) for i in range(n + 1)]


class Budget(_Frozen):
    """What a tune may spend per workload; the race stops before a round that would exceed it."""

    launches: int | None = Field(None, gt=0, le=100_000)
    requests: int | None = Field(None, gt=0, le=10_000_000)
    minutes: float | None = Field(None, gt=0, le=7 * 24 * 60, allow_inf_nan=False)


class TuneSpec(_Frozen):
    dimensions: dict[str, list[Value] | Range]
    workloads: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="name → workload fields (default: the matrix's workload)"
    )
    budget: Budget = Budget()
    max_rounds: int = Field(8, ge=3, le=100, description="launch rounds per stage (a verdict needs 3)")
    refine: bool = Field(True, description="after the race, try values between the leader and its neighbours")
    screen: bool = Field(
        True,
        description="measure the largest K per draft model or method first, skip what the theory rules out",
    )
    acceptance: float | None = Field(
        None, ge=0, le=1, description="expected per-token acceptance α for the theory's ordering"
    )

    @field_validator("dimensions")
    @classmethod
    def _known(cls, dims: dict[str, list[Value] | Range]) -> dict[str, list[Value] | Range]:
        if not dims:
            raise ValueError("at least one dimension is needed")
        for name, values in dims.items():
            if name not in DIMENSIONS:
                raise ValueError(f"unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
            if isinstance(values, list) and not values:
                raise ValueError(f"{name}: needs at least one value")
            if name in TEXT and isinstance(values, Range):
                raise ValueError(f"{name}: a list of values, not a range")
            if name in NUMERIC and isinstance(values, list):
                bad = [v for v in values if isinstance(v, (str, bool))]
                if bad:
                    raise ValueError(f"{name}: numbers only, got {bad[0]!r}")
        return dims

    @model_validator(mode="after")
    def _not_too_many(self) -> TuneSpec:
        n = 1
        for name in self.dimensions:
            n *= len(self.values(name))
        if n > MAX_CANDIDATES:
            raise ValueError(f"dimensions: {n} candidates, more than {MAX_CANDIDATES}")
        return self

    def values(self, name: str) -> list[Value]:
        raw = self.dimensions[name]
        out: list[Value] = list(raw.values()) if isinstance(raw, Range) else list(raw)
        return [int(v) if name in INTEGER and not isinstance(v, str) else v for v in out]

    def bounds(self, name: str) -> tuple[float, float]:
        nums = [float(v) for v in self.values(name) if not isinstance(v, str)]
        return min(nums), max(nums)

    def grid(self) -> list[Candidate]:
        """Every combination, in the order the dimensions and values are written."""
        names = list(self.dimensions)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*map(self.values, names))]


def candidate_name(c: Candidate) -> str:
    """An arm name (letters, digits, '-', '_') that says the candidate's values."""
    parts = []
    for key, value in c.items():
        text = str(value).rsplit("/", 1)[-1].removesuffix(".gguf") if key == "draft_model" else f"{value}"
        short = {"method": "", "draft_model": "dm", "draft_n_max": "k", "draft_n_min": "kmin",
                 "draft_p_min": "p", "ngram_n": "n", "ngram_m": "m"}[key]  # fmt: skip
        parts.append(short + _NAME.sub("_", str(text)).strip("_"))
    return "-".join(p for p in parts if p) or "candidate"


def neighbours(spec: TuneSpec, leader: Candidate, tried: list[Candidate]) -> list[Candidate]:
    """Refinement: for each numeric dimension, the midpoints between the leader's value and the
    nearest grid values either side (rounded for integer dimensions), inside the user's range
    and not tried yet."""
    out: list[Candidate] = []
    for name in spec.dimensions:
        if name not in NUMERIC:
            continue
        grid = sorted({float(v) for v in spec.values(name) if not isinstance(v, str)})
        here = float(leader[name])
        for other in (
            max((g for g in grid if g < here), default=None),
            min((g for g in grid if g > here), default=None),
        ):
            if other is None:
                continue
            mid: Value = round((here + other) / 2) if name in INTEGER else round((here + other) / 2, 4)
            new = {**leader, name: mid}
            if mid != leader[name] and new not in tried and new not in out:
                out.append(new)
    return out
