"""Measured verify curves as data the blind model uses (theory/measured/curves.py): per engine, backend,
weight kind and model kind, each with where it came from; where none is known the band is wide
(the roofline up to the highest curve measured), not the optimistic roofline alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.engines import theory_priors
from specbench.theory import predict
from specbench.theory.hardware import Gpu
from specbench.theory.measured.curves import TRANSFER, VerifyBand, backend, weight_kind
from specbench.theory.measured.engines import engine_band
from specbench.theory.presets import get_gpu
from tests.theory.labpair import lab_config

PRIORS = theory_priors()  # every engine's curves, as the engines declare them
VERIFY_CURVES = PRIORS.curves
H200 = get_gpu("H200")
CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=0.2, memory_gb=8.0, unified=True, host_link_gbs=20.0)


def test_every_curve_says_where_it_came_from_and_starts_at_one_step() -> None:
    for c in VERIFY_CURVES:
        assert c.where and c.source and c(1) == 1.0
        sizes = [t for t, _ in c.steps]
        assert sizes == sorted(sizes) and all(v >= 1.0 for _, v in c.steps)


def test_the_h200_curves_are_the_probes_numbers() -> None:
    membound, launch = (c for c in VERIFY_CURVES if (c.backend, c.kind) == ("cuda", "dense"))
    # 2026-12-04: v(2) 1.31, v(5) 1.50, v(9) 1.62, v(17) 1.92 on the 5.7 GB target
    assert [membound(t) for t in (2, 5, 9, 17)] == [1.31, 1.50, 1.62, 1.92]
    # first lease, 471 MB: flat 1.4–1.5 to 13 tokens (and 16: the same mmf kernel), 3.9 at 17
    assert [launch(t) for t in (5, 13, 16, 17)] == [1.51, 1.44, 1.44, 3.90]
    assert launch(100) == 3.90  # held past the largest size; the roofline takes over there


def test_a_matched_band_is_the_envelope_widened_by_the_transfer_share() -> None:
    band = verify_band("llamacpp", H200, 2.0, moe=False)
    assert len(band.matched) == 2 and "llama.cpp CUDA (f16/bf16, dense)" in band.text(5)
    central, low, high = (band.floor(end) for end in (None, "low", "high"))
    assert central is not None and low is not None and high is not None
    assert central(9) == pytest.approx((1.62 + 1.52) / 2)
    assert low(9) == pytest.approx(1 + 0.52 * (1 - TRANSFER))
    assert high(17) == pytest.approx(1 + 2.90 * (1 + TRANSFER))


def test_no_curve_for_the_setup_means_the_roofline_up_to_the_highest_measured() -> None:
    for band in (
        verify_band("vllm", H200, 2.0, moe=False),  # no vLLM curve
        verify_band("llamacpp", H200, 0.56, moe=False),  # quantized weights run other kernels
        verify_band(None, H200, 2.0, moe=False),
    ):
        assert not band.matched and "no curve measured" in band.text(5)
        assert band.floor(None) is None and band.floor("low") is None
        high = band.floor("high")
        assert high is not None and high(17) == 3.90  # the launch-bound cliff, the worst measured


def test_a_cpu_curve_bounds_the_band_from_above_only() -> None:
    band = verify_band("llamacpp", CPU, 2.0, moe=False)
    assert band.matched and band.floor(None) is None and band.floor("low") is None
    high = band.floor("high")
    assert high is not None and high(5) == pytest.approx(1 + 0.98 * (1 + TRANSFER))


def verify_band(kind: str | None, gpu: Gpu, bytes_per_weight: float, moe: bool) -> VerifyBand:
    return engine_band(PRIORS.of(kind), gpu, bytes_per_weight, moe, PRIORS)


def test_backends_and_weight_kinds() -> None:
    names = {"H200": "cuda", "Apple M3 Max": "metal", "MI300X": "rocm", "EPYC 9654": "cpu"}
    assert {n: backend(get_gpu(n)) for n in names} == names
    assert backend(CPU) == "cpu"
    assert (weight_kind(2.0), weight_kind(1.0), weight_kind(0.56)) == ("f16", "quant", "quant")


def test_the_blind_verify_takes_the_engines_curve_when_it_costs_more_than_the_roofline(
    tmp_path: Path,
) -> None:
    target, draft = lab_config(tmp_path, "gpu", "dense"), lab_config(tmp_path, "gpu", "draft")
    kw = {"draft_model": draft, "alpha": 0.8, "context": 256, "spread": False}
    known = predict(target, H200, "F16", "draft", 4, engine="llamacpp", priors=PRIORS, **kw)
    blind = predict(target, H200, "F16", "draft", 4, priors=PRIORS, **kw)
    b, roof = known.breakdown, blind.breakdown
    assert (b.verify_bound, roof.verify_bound) == ("curve", "bandwidth")
    assert b.target_step_s == roof.target_step_s  # the curve is in units of the model's own step
    # v(5) = the mean of the two dense f16 CUDA curves, 1.50 and 1.51 steps (+ the same sampling)
    assert b.verify_s - roof.verify_s == pytest.approx(0.505 * roof.target_step_s, rel=0.02)
    assert known.speedup < blind.speedup
