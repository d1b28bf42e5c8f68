"""VERIFY_STEP: an arm whose rounds verify just past a step in the forward probe's verify cost.

The forward probe (run/forwardprobe.py, on the baseline's launches) times a pass over b tokens;
in decode steps that is v(b) (theory/passcurve.py, anchored at the baseline's measured step, as
``predict --calibrate`` shows it). A verify's cost need not grow smoothly: on an H200 (llama.cpp
CUDA, f16) v stayed at 1.4–1.6 for b = 2…16 and was 3.7–3.9 at 17, where the matmul leaves its
small-batch kernel. An arm with draft max K verifies up to b = K + 1 tokens a round; when most
of its rounds reach K and b sits just past such a step, a slightly smaller K avoids it (ngram-mod
n_max 16 ran ×2.67 where n_max 15 ran ×3.29 on the same lease).

The rule, per speculating arm (every figure from the run, nothing interpolated):

- K is the draft max the arm's flags set (the engine's reading, ``Engine.speculation``); an arm
  whose flags leave it to the engine's default is skipped — the default is not on record;
- the probe ran (``forward_probe`` on the baseline's cells) at one sequence per pass, and b itself
  was probed; b′ is the largest probed size below b, with b − b′ ≤ :data:`MAX_GAP` (a step further
  down is no "just past": lowering K that far is another configuration, not a fix);
- v(b) ≥ :data:`STEP_RATIO` · v(b′), and v(b) / v(b′) > b / b′: the cost per token verified
  rises (a pass costing in proportion to its tokens, as a compute-bound one does, is no step:
  it is what every K trades against, and the prediction already prices it); and b′ ≥ 2, so that
  a draft max b′ − 1 ≥ 1 remains;
- the server counted the arm's drafting rounds (/metrics ``drafts``) and its mean draft per round
  d / R is ≥ :data:`REACH_SHARE` · K: the rounds do reach b. Without counted rounds d / R would
  be K by construction (counts.py estimates R = d / K), so the reach is unknown and nothing fires.

:func:`verify_step` says for one arm why it fires or not (``reason``), for tests and tools;
:func:`verify_step_findings` gives the findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.analysis.predicted.counts import draft_counts
from specbench.analysis.predicted.setup import pass_curve, single_level
from specbench.analysis.rundata import RunData
from specbench.errors import ConfigError
from specbench.theory.passcurve import PassCurve


class Code(StrEnum):
    VERIFY_STEP = "VERIFY_STEP"


SEVERITY = {Code.VERIFY_STEP: Severity.INFO}
ANCHOR = "verify-step"
STEP_RATIO = 1.5  # v(b) / v(b′) at or above this is a step (H200: 3.72–3.90 / 1.4–1.6 ≈ 2.4)
MAX_GAP = 4  # b − b′ at most this: the step is one the user can step back over
REACH_SHARE = 0.75  # mean draft per round ≥ this share of K: most rounds verify b tokens


@dataclass(frozen=True)
class StepCheck:
    """One arm against the probe: fires (``finding``) or why not (``reason``)."""

    arm: str
    draft_max: int
    verify: int  # b = K + 1
    below: int = 0  # b′, the largest probed size under b (0: none within reach)
    v: dict[int, float] = field(default_factory=dict)  # probed v from b′ to b
    mean_draft: float = math.nan
    finding: Finding | None = None
    reason: str | None = None


def probe_curve(run: RunData) -> PassCurve | None:
    """The baseline's probe as v(b) per probed size, or None: no probe (``forward_probe`` off, an
    attached run), no baseline rate, or more than one sequence per pass (then a pass carries
    C · b tokens of rounds of different lengths, which no single b describes)."""
    base = run.df[run.df["arm"] == run.baseline] if not run.df.empty else run.df
    if base.empty:
        return None
    rate = float(base["decode_tok_s"].median())
    if not rate > 0:
        return None
    try:
        curve = pass_curve(run, 1, rate)  # the theory's own curve, anchored at one sequence
        # the level last: it reads every record, and most runs without a probe stop above
        return curve if curve is not None and single_level(run) == 1 else None
    except ConfigError:  # no 1-token pass to anchor on, or a concurrency sweep
        return None


def verify_step(run: RunData, arm: str, curve: PassCurve) -> StepCheck | None:
    """``arm`` against ``curve``; None when there is nothing to say (the arm does not speculate,
    or its flags do not set a draft max)."""
    spec = run.engine.speculation(run.arm_args(arm))
    if spec is None or spec.k is None or spec.k_default or spec.k < 1:
        return None  # a default K is no flag the user set, and no finding says it is
    k, b = spec.k, spec.k + 1
    check = StepCheck(arm, k, b)
    if b not in curve.sizes:
        return _not(check, f"v({b}) was not probed")
    below = [s for s in curve.sizes if s < b]
    if not below or b - below[-1] > MAX_GAP:
        return _not(check, f"no probed size within {MAX_GAP} tokens under {b}")
    lo = below[-1]
    v = {s: curve.ratio(s) for s in curve.sizes if lo <= s <= b}
    check = StepCheck(arm, k, b, lo, v)
    if v[b] < STEP_RATIO * v[lo] or v[b] / v[lo] <= b / lo:
        return _not(check, f"no step: v({b}) = {v[b]:.2f}, v({lo}) = {v[lo]:.2f}")
    if lo < 2:
        return _not(check, f"no draft max keeps the rounds under the step at {lo}–{b} tokens")
    return _reach(run, check)


def _reach(run: RunData, check: StepCheck) -> StepCheck:
    """Fires when the counted rounds reach K on average (see the module docstring)."""
    counts = draft_counts(run.df, run.cells, check.arm, check.draft_max)
    if not counts.rounds_counted:
        return _not(check, "unknown: the server did not count the arm's drafting rounds")
    mean = counts.mean_draft
    if not mean >= REACH_SHARE * check.draft_max:
        shown = "no round" if not counts.rounds > 0 else f"{mean:.1f} tokens per round"
        return _not(
            replace(check, mean_draft=mean),
            f"the rounds rarely reach K: {shown} < {REACH_SHARE} × {check.draft_max}",
        )
    code = Code.VERIFY_STEP
    found = Finding(code, (check.arm,), _evidence(check, mean, counts.rounds), SEVERITY[code])
    return replace(check, mean_draft=mean, finding=found)


def _not(check: StepCheck, reason: str) -> StepCheck:
    return replace(check, reason=reason)


def _evidence(check: StepCheck, mean: float, rounds: float) -> str:
    b, lo, v = check.verify, check.below, check.v
    # b′ is the largest probed size under b, so whatever lies between was not probed: said, so
    # that nobody reads the step as sitting exactly at b
    between = list(range(lo + 1, b))
    inside = f"{_span(between)} not probed" if between else ""
    return (
        f"{check.arm}'s rounds verify up to {b} tokens (draft max {check.draft_max}; "
        f"{mean:.1f} drafted tokens per round over {rounds:.0f} counted rounds), just past a step in "
        f"the forward probe's verify cost: v({b}) = {v[b]:.2f} decode steps against "
        f"v({lo}) = {v[lo]:.2f} (×{v[b] / v[lo]:.2f}" + (f"; {inside}" if inside else "") + "). "
        f"A draft max of {lo - 1} keeps every round at or under {lo} tokens, v = {v[lo]:.2f}."
    )


def _span(sizes: list[int]) -> str:
    return str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"


def check(ev: RunEvidence) -> list[Finding]:
    """Rounds just past a step in the probed verify cost."""
    return verify_step_findings(ev.run)


def verify_step_findings(run: RunData) -> list[Finding]:
    """A VERIFY_STEP per measured speculating arm whose rounds fall just past a probed step."""
    curve = probe_curve(run)
    if curve is None:
        return []
    checks = (verify_step(run, arm, curve) for arm in run.measured_arms if arm != run.baseline)
    return [c.finding for c in checks if c is not None and c.finding is not None]


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
