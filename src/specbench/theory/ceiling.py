"""A measured baseline above the device's bandwidth roofline: said with its numbers, not an error.

Calibration fits η_bw ∈ (0, 1] so that the predicted baseline equals the measured one. A decode
rate above what the device's *full* bandwidth allows has no such η_bw::

    ceiling = C / t(target, C × 1; η_bw = 1)        tok/s per sequence at the full bandwidth

It happens for real: a CPU's probe can read a loaded machine (the copy probe read 9.9–20.0 GB/s
on the same VM) and a small model's weights can sit partly in the CPU caches. Refusing would
throw away a run whose arms are still comparable, so the theory takes the bandwidth the baseline
needs (η_bw = 1 on a device of that bandwidth, solved with brentq) and the calibration line says
so with the numbers. Only a rate above what the fixed latencies allow even at infinite
bandwidth (``kernels · t_kernel + t_forward`` per step) has no bandwidth that explains it; that
one stays a ConfigError that names both numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scipy.optimize import brentq

from specbench.errors import ConfigError
from specbench.theory.cost import Efficiency, forward_cost
from specbench.theory.hardware import Gpu
from specbench.theory.predict import Weights, baseline_tok_s

MARGIN = 1e-6  # solve for a bandwidth this much above the exact one, so η_bw = 1 fits it


@dataclass(frozen=True)
class Ceiling:
    """The device the calibration uses and, when the measured baseline broke the roofline, why."""

    gpu: Gpu
    note: str | None = None


def within_roofline(
    measured_tok_s: float, target: Weights, gpu: Gpu, concurrency: int, context: int, eff: Efficiency
) -> Ceiling:
    """``gpu`` as is, or with the bandwidth a too-fast baseline needs (see the module docstring).

    ``measured_tok_s`` is per sequence; a rate beyond the fixed latencies is a ConfigError.
    """
    full = replace(eff, bandwidth=1.0)

    def rate(g: Gpu) -> float:
        return (
            baseline_tok_s(target.arch, g, target.bytes_per_weight, concurrency, context, full) / concurrency
        )

    ceiling = rate(gpu)
    if measured_tok_s <= ceiling:
        return Ceiling(gpu)
    step = forward_cost(target.arch, target.bytes_per_weight, concurrency, 1, context)
    fixed_s = step.kernels * eff.kernel_s + eff.forward_s
    if measured_tok_s * fixed_s >= 1.0:
        raise ConfigError(
            f"the baseline's {measured_tok_s:.1f} tok/s is faster than the fixed latencies allow at any"
            f" bandwidth ({fixed_s * 1e3:.2f} ms per step: {step.kernels} kernels"
            f" × {eff.kernel_s * 1e6:.1f} µs + {eff.forward_s * 1e3:.2f} ms, at most {1 / fixed_s:.1f} tok/s)"
        )
    hi = gpu.bandwidth_gbs * 2
    while rate(_with_bandwidth(gpu, hi)) < measured_tok_s:
        hi *= 2
    needed = brentq(
        lambda bw: rate(_with_bandwidth(gpu, bw)) - measured_tok_s, gpu.bandwidth_gbs, hi, xtol=1e-9
    )
    used = _with_bandwidth(gpu, float(needed) * (1 + MARGIN))
    why = (
        "the stored probe read a busier machine, or the CPU caches hold part of the weights"
        if gpu.name == "cpu"
        else "this device streams faster than its datasheet figure"
    )
    note = (
        f"The baseline's {measured_tok_s:.1f} tok/s is above the bandwidth roofline of {gpu.name}:"
        f" {step.bytes / 1e9:.3f} GB per step at the full {gpu.bandwidth_gbs:.1f} GB/s allows"
        f" {ceiling:.1f} tok/s, so the theory uses the {used.bandwidth_gbs:.1f} GB/s the baseline"
        f" needs (η_bw 1); likely {why}."
    )
    return Ceiling(used, note)


def _with_bandwidth(gpu: Gpu, bandwidth_gbs: float) -> Gpu:
    """``gpu`` at another bandwidth; a unified-memory device's checkpoint link follows it."""
    link = bandwidth_gbs if gpu.unified else gpu.host_link_gbs
    return replace(gpu, bandwidth_gbs=bandwidth_gbs, host_link_gbs=link)
