"""`specbench predict` answers for every model × GPU preset pair (issue 7's done-when)."""

from __future__ import annotations

import math

import pytest

from specbench.errors import ConfigError
from specbench.theory import list_presets, predict

PRESETS = list_presets()
GPUS = [g for g in PRESETS["gpus"] if g != "cpu"]  # the cpu entry probes this machine: tested elsewhere


@pytest.mark.parametrize("model", PRESETS["models"])
def test_every_model_gpu_pair_predicts(model: str) -> None:
    answered = 0
    for gpu in GPUS:
        for method in ("ngram", "draft", "mtp"):
            try:
                p = predict(model, gpu, "Q4_K_M", method, 4, acceptance=0.6, draft_model="Qwen3.5-0.8B")
            except ConfigError as err:  # e.g. MTP on a model without MTP layers: a clear refusal
                assert str(err) and "\n" not in str(err)
                continue
            assert p.baseline_tok_s > 0 and math.isfinite(p.speedup) and p.speedup > 0
            answered += 1
    assert answered >= len(GPUS)  # at least one method answers on every GPU
