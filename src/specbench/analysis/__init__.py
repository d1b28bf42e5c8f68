"""From a run directory to conclusions, apart from how they are rendered.

Step 8 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report: takes in a run directory (``store``) and hands one ``Analysis`` to
``report``.

:mod:`rundata` loads a run directory (:class:`RunData`) and computes per-arm summaries and
speedups, :mod:`findings` holds every check (one module per family of codes; ``judge(run)``
runs them all), :mod:`decision` says what to run per workload, :mod:`predicted` puts the theory
(``specbench.theory``) to the run, and :mod:`result` gathers all of it, with the report's tables
(:mod:`tables`) and the theory's prediction, into one :class:`Analysis` (``analyse(run)``),
which the next step, ``report``, renders. :mod:`compare` compares two runs. The statistics
(:mod:`stats`, :mod:`launches`, :mod:`multiplicity`, :mod:`sequential`, :mod:`bimodality`), the
per-request metrics (:mod:`metrics`, read from the packed chunks: :mod:`packed`,
:mod:`tokenrows`, :mod:`rowbatch`) and the evidence the checks and tables share
(:mod:`evidence`: acceptance sources, streams, the client's lag, noise) live beside them.
``report/`` only renders.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specbench.analysis.compare import (
        compare_runs as compare_runs,
    )
    from specbench.analysis.decision import (
        KEEP_OFF as KEEP_OFF,
    )
    from specbench.analysis.decision import (
        Decision as Decision,
    )
    from specbench.analysis.decision import (
        decision_table as decision_table,
    )
    from specbench.analysis.decision import (
        untrusted_arms as untrusted_arms,
    )
    from specbench.analysis.findings.judge import (
        judge as judge,
    )
    from specbench.analysis.findings.verdict import (
        LARGE_LOSS as LARGE_LOSS,
    )
    from specbench.analysis.findings.verdict import (
        spec_loss_severity as spec_loss_severity,
    )
    from specbench.analysis.result import (
        Analysis as Analysis,
    )
    from specbench.analysis.result import (
        analyse as analyse,
    )
    from specbench.analysis.result import (
        analyse_dir as analyse_dir,
    )
    from specbench.analysis.rundata import (
        ByPoint as ByPoint,
    )
    from specbench.analysis.rundata import (
        RunData as RunData,
    )
    from specbench.analysis.rundata import (
        arm_acceptance as arm_acceptance,
    )
    from specbench.analysis.rundata import (
        arm_summary as arm_summary,
    )
    from specbench.analysis.rundata import (
        comparisons as comparisons,
    )
    from specbench.analysis.rundata import (
        detail_frame as detail_frame,
    )
    from specbench.analysis.rundata import (
        load_run as load_run,
    )
    from specbench.analysis.rundata import (
        point_comparisons as point_comparisons,
    )
    from specbench.analysis.rundata import (
        pooled_acceptance as pooled_acceptance,
    )

# Lazy (PEP 562): a leaf such as ``analysis.findings.model`` (the Finding model) must be
# importable without loading the whole analysis. ``findings`` names the package of checks, so
# the function that runs them all is ``judge`` (``specbench.findings`` at the top level).
_EXPORTS = {
    "compare_runs": "specbench.analysis.compare",
    "KEEP_OFF": "specbench.analysis.decision",
    "Decision": "specbench.analysis.decision",
    "decision_table": "specbench.analysis.decision",
    "untrusted_arms": "specbench.analysis.decision",
    "LARGE_LOSS": "specbench.analysis.findings.verdict",
    "judge": "specbench.analysis.findings.judge",
    "spec_loss_severity": "specbench.analysis.findings.verdict",
    "Analysis": "specbench.analysis.result",
    "analyse": "specbench.analysis.result",
    "analyse_dir": "specbench.analysis.result",
    "ByPoint": "specbench.analysis.rundata",
    "RunData": "specbench.analysis.rundata",
    "arm_acceptance": "specbench.analysis.rundata",
    "arm_summary": "specbench.analysis.rundata",
    "comparisons": "specbench.analysis.rundata",
    "detail_frame": "specbench.analysis.rundata",
    "load_run": "specbench.analysis.rundata",
    "pooled_acceptance": "specbench.analysis.rundata",
    "point_comparisons": "specbench.analysis.rundata",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specbench.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
