"""Fit the bandwidth efficiency η_bw so the predicted baseline equals a measured one.

The baseline decodes one token for each of C sequences per step::

    baseline tok/s = C / (t(target, C × 1; η_bw) + t_sample)

and brentq finds the η_bw ∈ (0, 1] that makes it the measured rate; the other efficiency fields
(fixed latencies, round overhead) are kept. :mod:`specbench.theory.speedup` then predicts with it.
"""

from __future__ import annotations

from dataclasses import replace

from scipy.optimize import brentq

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture
from specbench.theory.cost import Efficiency, forward_cost, forward_time, sampling_time
from specbench.theory.hardware import Gpu
from specbench.theory.inputs import Weights, check_inputs
from specbench.theory.presets import get_gpu, get_model, get_quant


def baseline_tok_s(
    target: Architecture,
    gpu: Gpu,
    bpw: float,
    seqs: int,
    context: int,
    eff: Efficiency,
    head_bpw: float | None = None,
) -> float:
    """C / t(target, C × 1), the step's host sampling of C positions included; ``head_bpw``: the
    LM head's bytes per weight where its format is its own (cost.forward_cost)."""
    step = forward_time(forward_cost(target, bpw, seqs, 1, context, head_bpw), gpu, eff)
    return seqs / (step + sampling_time(target, seqs, gpu, eff))


def calibrate_efficiency(
    measured_baseline_tok_s: float,
    model: str,
    gpu: str,
    quant: str,
    context: int = 4096,
    *,
    concurrency: int = 1,
    efficiency: Efficiency | None = None,
) -> Efficiency:
    """Fit η_bw so the predicted baseline equals a measured one (other fields kept).

    Solves C / t(η_bw) = measured for η_bw ∈ (0, 1] with brentq; a measurement faster than
    η_bw = 1 allows, or below what the fixed latencies permit, is a ConfigError.
    """
    q = get_quant(quant)
    target = Weights(get_model(model), q.bytes_per_weight, q.name, q.head_bytes_per_weight)
    return fit_bandwidth(
        measured_baseline_tok_s, target, get_gpu(gpu), context, concurrency=concurrency, efficiency=efficiency
    )


def fit_bandwidth(
    measured_baseline_tok_s: float,
    target: Weights,
    gpu: Gpu,
    context: int = 4096,
    *,
    concurrency: int = 1,
    efficiency: Efficiency | None = None,
) -> Efficiency:
    """:func:`calibrate_efficiency` on a resolved architecture and device."""
    if measured_baseline_tok_s <= 0:
        raise ConfigError(f"measured baseline must be positive, got {measured_baseline_tok_s}")
    check_inputs(1, concurrency, context)
    base = efficiency or Efficiency()
    gpu = gpu.for_weights(target.quant)

    def gap(eta: float) -> float:
        eff = replace(base, bandwidth=eta)
        return (
            baseline_tok_s(
                target.arch,
                gpu,
                target.bytes_per_weight,
                concurrency,
                context,
                eff,
                target.head_bytes_per_weight,
            )
            - measured_baseline_tok_s
        )

    lo, hi = 1e-4, 1.0
    rate = f"{measured_baseline_tok_s:.1f} tok/s"
    if gap(hi) < 0:
        raise ConfigError(
            f"{rate} is faster than {target.arch.name} can decode on {gpu.name} at full bandwidth"
        )
    if gap(lo) > 0:
        raise ConfigError(
            f"{rate} is slower than any bandwidth efficiency explains; raise kernel_s/forward_s"
        )
    return replace(base, bandwidth=float(brentq(gap, lo, hi, xtol=1e-9)))
