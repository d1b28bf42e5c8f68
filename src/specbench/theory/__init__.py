"""Theory model: predict whether speculative decoding can pay off, from architecture and hardware.

Public API::

    predict(model, gpu, quant, method, draft_max, *, acceptance=..., alpha=..., ...) -> Prediction
        (also baseline_tok_s=, accepted_length=, tree=Tree(top_k, tokens), tensor_parallel=;
        gpu may be a preset, a hardware YAML file or a Gpu)
    format_prediction(prediction) -> str
    list_presets() -> {"models": [...], "gpus": [...], "quants": [...]}
    calibrate_efficiency(measured_baseline_tok_s, model, gpu, quant, context=4096) -> Efficiency
    predict_stopped(model, gpu, quant, method, draft_max, *, alpha=..., stop=..., n_min=0, ...)
        -> StoppedPrediction    (drafts that end at the first unsure token)

On a run directory (lab truth.json, config.json or a preset describes its model)::

    model_from_run(run_dir) -> RunModels | None
    calibrate_from_run(run_dir, fit_arm=None) -> Efficiency
    predict_arms(run_dir, fit_arm=None) -> list[ArmPrediction]
    run_theory(run_dir, fit_arm=None) -> RunTheory;  format_arm_predictions(run_theory) -> str

See docs/theory.md for the model, its assumptions and its limits.
"""

from __future__ import annotations

from specbench.theory.calibrate import calibrate_efficiency
from specbench.theory.cost import Efficiency
from specbench.theory.formulas import (
    acceptance_from_alpha,
    alpha_from_acceptance,
    experts_touched,
    saturation_tokens,
    tokens_per_round,
)
from specbench.theory.hardware import Gpu
from specbench.theory.methods import METHODS
from specbench.theory.predict import Breakdown, Prediction, Tree, predict
from specbench.theory.predicttext import format_prediction
from specbench.theory.presets import list_presets
from specbench.theory.runpredict import (
    ArmPrediction,
    RunTheory,
    calibrate_from_run,
    predict_arms,
    run_theory,
)
from specbench.theory.runspec import RunModels, model_from_run
from specbench.theory.runtext import format_arm_predictions
from specbench.theory.stopping import StoppedPrediction, predict_stopped

__all__ = [
    "METHODS",
    "ArmPrediction",
    "Breakdown",
    "Efficiency",
    "Gpu",
    "Prediction",
    "RunModels",
    "RunTheory",
    "StoppedPrediction",
    "Tree",
    "acceptance_from_alpha",
    "alpha_from_acceptance",
    "calibrate_efficiency",
    "calibrate_from_run",
    "experts_touched",
    "format_arm_predictions",
    "format_prediction",
    "list_presets",
    "model_from_run",
    "predict",
    "predict_arms",
    "predict_stopped",
    "run_theory",
    "saturation_tokens",
    "tokens_per_round",
]
