"""The theory model applied to one run directory: what the report's "Predicted" section shows.

Takes in a run directory (read through ``analysis.load_run``) and hands on per-arm predictions
to ``analysis.result`` and the report: :mod:`models` finds the run's models (lab truth.json,
config.json, a .gguf header or a preset), device and each arm's method; :mod:`setup` fixes the
bandwidth efficiency on the baseline arm (with the forward probe's pass curve when the run has
one); :mod:`arms` predicts each arm from its measured acceptance (and, with :mod:`counts`, from
what the drafter actually did); :mod:`text` is their text. The model itself is
:mod:`specbench.theory`, which reads no run directory::

    model_from_run(run_dir) -> RunModels | None
    calibrate_from_run(run_dir, fit_arm=None) -> Efficiency
    predict_arms(run_dir, fit_arm=None) -> list[ArmPrediction]
    run_theory(run_dir, fit_arm=None) -> RunTheory;  format_arm_predictions(run_theory) -> str

Each name loads its module on first use (PEP 562): ``run.prepare`` reads a run's models through
:mod:`models` when a run starts and must not load the findings' modules with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specbench.analysis.predicted.arms import ArmPrediction as ArmPrediction
    from specbench.analysis.predicted.arms import RunTheory as RunTheory
    from specbench.analysis.predicted.arms import calibrate_from_run as calibrate_from_run
    from specbench.analysis.predicted.arms import predict_arms as predict_arms
    from specbench.analysis.predicted.arms import run_theory as run_theory
    from specbench.analysis.predicted.models import RunModels as RunModels
    from specbench.analysis.predicted.models import model_from_run as model_from_run
    from specbench.analysis.predicted.text import format_arm_predictions as format_arm_predictions

_EXPORTS = {
    "ArmPrediction": "arms",
    "RunTheory": "arms",
    "calibrate_from_run": "arms",
    "predict_arms": "arms",
    "run_theory": "arms",
    "RunModels": "models",
    "model_from_run": "models",
    "format_arm_predictions": "text",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
