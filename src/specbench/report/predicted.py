"""The "Predicted vs measured" section: the theory model calibrated on the baseline arm, per arm.

The theory fits η_bw so its baseline equals the measured baseline, then predicts each speculative
arm's decode speedup from the arm's measured acceptance (see :mod:`specbench.analysis.predicted.arms`),
each with the 80 % interval of the terms the run does not measure and the term that dominates it
(:mod:`specbench.analysis.predicted.spread`). ``error = measured / predicted − 1``. The theory is
computed by :func:`specbench.analysis.result.analyse`; when no prediction is possible the section is
one line saying why; it never stops the report. A run that sweeps concurrency gets each level's
calibration, one table with a level column, and per arm where speculation stops paying.
"""

from __future__ import annotations

import pandas as pd

from specbench.analysis.predicted.arms import RunTheory, SweepTheory
from specbench.analysis.predicted.text import prediction_rows, skipped_lines, sweep_lines
from specbench.report.page.document import Block, Bullets, Heading, Para, Table

TITLE = "Predicted vs measured"
NOTE = (
    "Theory (docs/theory.md) calibrated so its baseline equals the measured one; each arm is predicted "
    "from its measured acceptance A at its configured K. Replayed: the same cost model on the drafting "
    "the arm actually did (rounds, tokens per draft). Round ms: one drafting round measured from the "
    "decode windows vs modelled; the gap is what the model leaves out (not measurable from fewer than ten "
    "rounds or where it would outlast a request; stalled requests left out). K: an n-gram arm's bound on one "
    'draft (≤), "(default)" where no flag set it. error = measured / predicted − 1, "not comparable" '
    "where the arm drafted on under 80 % of its passes (compare replayed). "
    "[80 %]: the interval the terms this run does not measure give (the engine's host work, the launch "
    "latency, the verify cost where no probe measured it); the line under the table names the widest."
)
SWEEP_NOTE = (
    "At C requests in flight a verify carries C × (K + 1) tokens. Where the forward probe (passes of up to"
    " 65 tokens, one sequence) measured that width, the verify is the probe's; beyond it the arm is"
    " predicted from the roofline, at least the probe's largest pass, with the interval reaching that pass"
    ' extrapolated in proportion to its tokens, and the verify pass column says "beyond the probe".'
)


def theory_section(theory: RunTheory | str) -> list[Block]:
    """Blocks for a computed theory, or the one-line reason it is unavailable."""
    if isinstance(theory, str):
        return [Heading(TITLE), Para(f"No prediction: {theory}.")]
    blocks: list[Block] = [Heading(TITLE), Para(theory.describe())]
    if isinstance(theory, SweepTheory):
        blocks += [Bullets(tuple(theory.level_lines())), Para(SWEEP_NOTE)]
    blocks.append(Para(NOTE))
    rows = prediction_rows(theory.arms)
    if rows:
        blocks.append(Table(pd.DataFrame(rows), "decode speedup vs the baseline: predicted, measured, error"))
    skipped = skipped_lines(theory.arms)
    if isinstance(theory, SweepTheory):
        skipped += sweep_lines(theory)
    if skipped:
        blocks.append(Bullets(tuple(skipped)))
    if not rows and not skipped:
        blocks.append(Para("No arm besides the baseline was measured."))
    return blocks


def predicted_blocks(theory: RunTheory | str) -> list[Block]:
    """The section for an analysis' theory; a formatting failure becomes the section's one-line reason."""
    try:
        return theory_section(theory)
    except Exception as err:  # formatting must not take the report down either
        return theory_section(f"the theory section failed ({type(err).__name__}: {err})")
