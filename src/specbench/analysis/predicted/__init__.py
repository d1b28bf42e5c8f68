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
"""

from __future__ import annotations

from specbench.analysis.predicted.arms import (
    ArmPrediction,
    RunTheory,
    calibrate_from_run,
    predict_arms,
    run_theory,
)
from specbench.analysis.predicted.models import RunModels, model_from_run
from specbench.analysis.predicted.text import format_arm_predictions

__all__ = [
    "ArmPrediction",
    "RunModels",
    "RunTheory",
    "calibrate_from_run",
    "format_arm_predictions",
    "model_from_run",
    "predict_arms",
    "run_theory",
]
