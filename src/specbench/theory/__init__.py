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

A pure model (the last step of the analysis in the flow matrix → … → store → analysis (theory) →
report): it takes in architectures, hardware, a method and an acceptance and hands on
predictions; it reads no run directory. The per-run adapters (a run's models, device and
calibration, per-arm predictions) are :mod:`specbench.analysis.predicted`.

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
from specbench.theory.stopping import StoppedPrediction, predict_stopped

__all__ = [
    "METHODS",
    "Breakdown",
    "Efficiency",
    "Gpu",
    "Prediction",
    "StoppedPrediction",
    "Tree",
    "acceptance_from_alpha",
    "alpha_from_acceptance",
    "calibrate_efficiency",
    "experts_touched",
    "format_prediction",
    "list_presets",
    "predict",
    "predict_stopped",
    "saturation_tokens",
    "tokens_per_round",
]
