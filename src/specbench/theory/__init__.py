"""Theory model: predict whether speculative decoding can pay off, from architecture and hardware.

Public API::

    predict(model, gpu, quant, method, draft_max, *, acceptance=..., alpha=..., ...) -> Prediction
        (also baseline_tok_s=, accepted_length=, tree=Tree(top_k, tokens), tensor_parallel=;
        gpu may be a preset, a hardware YAML file or a Gpu; engine= adds an engine's host costs
        and verify curve; .interval: the 80 % interval of the terms not known for the setup and
        the term that dominates it, theory/spread/terms.py; alpha_range= for an estimated acceptance)
    format_prediction(prediction) -> str
    list_presets() -> {"models": [...], "gpus": [...], "quants": [...]}
    calibrate_efficiency(measured_baseline_tok_s, model, gpu, quant, context=4096) -> Efficiency
    predict_stopped(model, gpu, quant, method, draft_max, *, alpha=..., stop=..., n_min=0, ...)
        -> StoppedPrediction    (drafts that end at the first unsure token)
    predict_levels([1, 8, 64], model, gpu, ...) -> [Prediction]; format_levels(predictions) -> str
        (each concurrency level, and where speculation stops paying: stops_paying, theory/levels.py)

A pure model (the last step of the analysis in the flow matrix → … → store → analysis (theory) →
report): it takes in architectures, hardware, a method and an acceptance and hands on
predictions; it reads no run directory. The per-run adapters (a run's models, device and
calibration, per-arm predictions) are :mod:`specbench.analysis.predicted`.

See docs/theory.md for the model, its assumptions and its limits.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
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
    from specbench.theory.levels import format_levels, predict_levels, stops_paying
    from specbench.theory.methods import METHODS
    from specbench.theory.predicttext import format_prediction
    from specbench.theory.presets import list_presets
    from specbench.theory.speedup import Breakdown, Prediction, Tree, predict
    from specbench.theory.stopping import StoppedPrediction, predict_stopped

# Lazy (PEP 562), as specbench/__init__: the runner needs theory.hardware (the machine probe)
# and must not load SciPy with it. A name -> the module that defines it.
_EXPORTS = {
    "METHODS": "methods",
    "Breakdown": "speedup",
    "Efficiency": "cost",
    "Gpu": "hardware",
    "Prediction": "speedup",
    "StoppedPrediction": "stopping",
    "Tree": "speedup",
    "acceptance_from_alpha": "formulas",
    "alpha_from_acceptance": "formulas",
    "calibrate_efficiency": "calibrate",
    "experts_touched": "formulas",
    "format_levels": "levels",
    "format_prediction": "predicttext",
    "list_presets": "presets",
    "predict": "speedup",
    "predict_levels": "levels",
    "predict_stopped": "stopping",
    "saturation_tokens": "formulas",
    "stops_paying": "levels",
    "tokens_per_round": "formulas",
}
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
    "format_levels",
    "format_prediction",
    "list_presets",
    "predict",
    "predict_levels",
    "predict_stopped",
    "saturation_tokens",
    "stops_paying",
    "tokens_per_round",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specbench.theory' has no attribute {name!r}")
    return getattr(importlib.import_module(f"specbench.theory.{module}"), name)
