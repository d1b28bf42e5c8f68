"""After its first launch, a run says when the plan's estimate was wrong (issue 44).

The plan's estimate is made before anything runs (:mod:`specbench.run.plan`); a loaded machine, or
threads that outnumber the free cores, can make the run many times slower (a plan of ≈ 1:51 took
23:12). The first launch measured is the first evidence: if it took more than :data:`OFF` times
the plan's pace for its work, or less than 1/:data:`OFF`, one line says so and what the rest of
the run takes at the pace seen. Work is counted in output tokens at most (``max_tokens`` of the
requests and warm-ups), the unit the estimate's rates are per.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.matrix.config import Cell, RequestSpec
from specbench.run.progress import clock_text

if TYPE_CHECKING:  # the plan imports the analysis (pandas, SciPy): the runner must not load it
    from specbench.run.plan import Estimate

OFF = 2.0  # the pace may be this far off either way before the run says so


def cell_tokens(cell: Cell, todo: Sequence[RequestSpec], warm: bool) -> int:
    """Output tokens at most of a launch that runs ``todo`` (and the warm-ups, on a fresh one)."""
    return sum(r.max_tokens for r in (*todo, *(cell.warmup if warm else ())))


@dataclass
class Pace:
    """The plan's pace, checked once: against the first launch that ran on its first attempt."""

    per_token: float  # the plan's seconds per output token (plan.Estimate.per_token)
    planned: str  # the plan's estimate as it printed it ("≈ 1:51")
    left: int = 0  # output tokens the run still had to generate when it started
    checked: bool = False

    @classmethod
    def of(cls, estimate: Estimate) -> Pace | None:
        """The pace of a plan's estimate (None: the plan had none)."""
        if estimate.per_token is None or estimate.per_token <= 0:
            return None
        return cls(estimate.per_token, estimate.text())

    def first_launch(self, elapsed: float, tokens: int) -> str | None:
        """The line to print after the first launch (``elapsed`` seconds for ``tokens``), or None
        when its pace is within :data:`OFF` of the plan's; only the first call counts."""
        if self.checked or tokens <= 0 or elapsed <= 0:
            return None
        self.checked = True
        expected = self.per_token * tokens
        ratio = elapsed / expected
        if 1 / OFF <= ratio <= OFF:
            return None
        rest = max(self.left - tokens, 0) * elapsed / tokens
        how = f"{ratio:.1f}× slower" if ratio > 1 else f"{1 / ratio:.1f}× faster"
        return (
            f"pace: the first launch took {clock_text(elapsed)} where the plan's pace gave it "
            f"{clock_text(expected)} ({how}): the rest of the run looks like ≈ {clock_text(rest)} "
            f"at this pace (the plan said {self.planned} in all)"
        )
