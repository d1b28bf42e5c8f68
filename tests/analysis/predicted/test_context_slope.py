"""The baseline step's cost per context position, fitted on the baseline's requests: the forward
probe runs at an empty cache, so this is what tells a probed verify what the run's context costs
(theory/predict.py verify_context_time). Fails without the fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.predicted.setup import context_slope


def test_the_baseline_s_context_slope_is_fitted_on_its_requests() -> None:
    ctx = np.array([100.0, 150.0, 200.0, 300.0])
    step = 0.030 + 25e-6 * (ctx + 32)  # contexts are prompt + half of 64 output tokens
    base = pd.DataFrame({"prompt_tokens": ctx, "output_tokens": 64.0, "decode_tok_s": 1 / step})
    assert context_slope(base) == pytest.approx(25e-6)
    narrow = base.assign(prompt_tokens=[100.0, 101.0, 102.0, 103.0])  # too little span to fit
    assert context_slope(narrow) == 0.0
    assert context_slope(base.iloc[:2]) == 0.0
