"""A measured baseline above the device's bandwidth roofline: said with its numbers, not an error.

Calibration fits η_bw ∈ (0, 1] so that the predicted baseline equals the measured one. A decode
rate above what the device's *full* bandwidth allows has no such η_bw::

    ceiling = C / t(target, C × 1; η_bw = 1)        tok/s per sequence at the full bandwidth

It happens for real: the fixed latencies (``t_kernel``, ``t_forward``, ``vocab_s``) are defaults
set on a GPU, and a tiny lab model on a CPU steps in 25 µs; a CPU's probe can read a loaded
machine (the copy probe read 9.9–20.0 GB/s on the same VM) and a small model's weights can sit
partly in the CPU caches. Refusing would throw away a run whose arms are still comparable, so
the theory first scales the fixed latencies down by the factor the baseline needs (η_bw = 1,
solved with brentq); if no latency at all is not enough, it drops them and takes the bandwidth
the baseline needs. The calibration line says which, with the numbers. Only a rate that the
host sampling's logit copy alone cannot reach at any bandwidth is a ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scipy.optimize import brentq

from specbench.errors import ConfigError
from specbench.theory.calibrate import baseline_tok_s
from specbench.theory.cost import Efficiency, forward_cost
from specbench.theory.hardware import Gpu
from specbench.theory.inputs import Weights

MARGIN = 1e-6  # solve for a bandwidth this much above the exact one, so η_bw = 1 fits it


@dataclass(frozen=True)
class Ceiling:
    """The device and base efficiency the calibration uses and, when the measured baseline broke
    the roofline, what was changed and why."""

    gpu: Gpu
    efficiency: Efficiency
    note: str | None = None


def _scaled(eff: Efficiency, f: float) -> Efficiency:
    """``eff`` at η_bw = 1 with its fixed latencies scaled by ``f``."""
    return replace(
        eff, bandwidth=1.0, kernel_s=eff.kernel_s * f, forward_s=eff.forward_s * f, vocab_s=eff.vocab_s * f
    )


def within_roofline(
    measured_tok_s: float, target: Weights, gpu: Gpu, concurrency: int, context: int, eff: Efficiency
) -> Ceiling:
    """``gpu`` and ``eff`` as they are, or what a too-fast baseline needs (module docstring).

    ``measured_tok_s`` is per sequence. First the fixed latencies shrink (they are defaults set on
    a GPU; a tiny model on a CPU launches its kernels far faster); if even none is not enough,
    the bandwidth grows too.
    """

    def rate(g: Gpu, e: Efficiency) -> float:
        c = concurrency
        return (
            baseline_tok_s(
                target.arch, g, target.bytes_per_weight, c, context, e, target.head_bytes_per_weight
            )
            / c
        )

    ceiling = rate(gpu, _scaled(eff, 1.0))
    if measured_tok_s <= ceiling:
        return Ceiling(gpu, eff)
    step = forward_cost(
        target.arch, target.bytes_per_weight, concurrency, 1, context, target.head_bytes_per_weight
    )
    head = (
        f"The baseline's {measured_tok_s:.1f} tok/s is above the roofline of {gpu.name}:"
        f" {step.bytes / 1e9:.3f} GB per step at the full {gpu.bandwidth_gbs:.1f} GB/s{_probed(gpu)} plus"
        f" {step.kernels} kernels × {eff.kernel_s * 1e6:.1f} µs and {eff.forward_s * 1e3:.2f} ms per pass"
        f" allow {ceiling:.1f} tok/s"
    )
    if rate(gpu, _scaled(eff, 0.0)) > measured_tok_s:
        f = float(brentq(lambda x: rate(gpu, _scaled(eff, x)) - measured_tok_s, 0.0, 1.0, xtol=1e-12))
        used = _scaled(eff, f * (1 - MARGIN))
        note = (
            f"{head}, so the theory scales the fixed latencies by {f:.3f}"
            f" ({used.kernel_s * 1e6:.3f} µs per kernel, {used.forward_s * 1e3:.3f} ms per pass; η_bw 1)."
        )
        return Ceiling(gpu, replace(used, bandwidth=eff.bandwidth), note)
    zero = _scaled(eff, 0.0)
    hi = gpu.bandwidth_gbs * 2
    while rate(_with_bandwidth(gpu, hi), zero) < measured_tok_s:
        hi *= 2
        if hi > gpu.bandwidth_gbs * 1e6:
            raise ConfigError(f"{head}, and no bandwidth explains it (the host sampling alone is slower)")
    gap = lambda bw: rate(_with_bandwidth(gpu, bw), zero) - measured_tok_s  # noqa: E731
    needed = brentq(gap, gpu.bandwidth_gbs, hi, xtol=1e-9)
    bigger = _with_bandwidth(gpu, float(needed) * (1 + MARGIN))
    why = (
        "the stored probe read a busier machine, or the CPU caches hold part of the weights"
        if gpu.name == "cpu"
        else "this device streams faster than its datasheet figure"
    )
    note = (
        f"{head}, so the theory drops the fixed latencies and uses the {bigger.bandwidth_gbs:.1f} GB/s"
        f" the baseline needs in place of {gpu.bandwidth_gbs:.1f} GB/s (compute scaled alike, to"
        f" {bigger.tflops:.3g} TFLOPS; η_bw 1 is of the {bigger.bandwidth_gbs:.1f}); likely {why}."
    )
    return Ceiling(bigger, replace(zero, bandwidth=eff.bandwidth), note)


def _probed(gpu: Gpu) -> str:
    # two bandwidths appear in one paragraph: say which one was measured
    return " (the run's probe)" if gpu.name == "cpu" else ""


def _with_bandwidth(gpu: Gpu, bandwidth_gbs: float) -> Gpu:
    """``gpu`` at another bandwidth; a unified-memory device's checkpoint link follows it, and so
    does the compute rate: a probe that read a busy machine read both low (a small model on a
    loaded CPU can be compute-bound at the probed rate, where no bandwidth alone explains it)."""
    link = bandwidth_gbs if gpu.unified else gpu.host_link_gbs
    tflops = gpu.tflops * max(1.0, bandwidth_gbs / gpu.bandwidth_gbs)
    return replace(gpu, bandwidth_gbs=bandwidth_gbs, host_link_gbs=link, tflops=tflops)
