"""Theory model: predict whether speculative decoding can pay off, from architecture and hardware.

Public API::

    predict(model, gpu, quant, method, draft_max, *, acceptance=..., alpha=..., ...) -> Prediction
    format_prediction(prediction) -> str
    list_presets() -> {"models": [...], "gpus": [...], "quants": [...]}
    calibrate_efficiency(measured_baseline_tok_s, model, gpu, quant, context=4096) -> Efficiency

See docs/theory.md for the model, its assumptions and its limits.
"""

from __future__ import annotations

from specbench.theory.cost import Efficiency
from specbench.theory.formulas import (
    acceptance_from_alpha,
    alpha_from_acceptance,
    experts_touched,
    saturation_tokens,
    tokens_per_round,
)
from specbench.theory.methods import METHODS
from specbench.theory.predict import Breakdown, Prediction, calibrate_efficiency, format_prediction, predict
from specbench.theory.presets import list_presets

__all__ = [
    "METHODS",
    "Breakdown",
    "Efficiency",
    "Prediction",
    "acceptance_from_alpha",
    "alpha_from_acceptance",
    "calibrate_efficiency",
    "experts_touched",
    "format_prediction",
    "list_presets",
    "predict",
    "saturation_tokens",
    "tokens_per_round",
]
