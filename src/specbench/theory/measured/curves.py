"""Verify-cost curves engines were measured to have, per engine, backend and weight kind.

A roofline calls a dense verify of a few tokens "one decode step" whenever the pass is
memory-bound: the weights are read once however many columns the matmuls have. Engines do not
run that way. llama.cpp's CUDA backend runs f16 matmuls of 2–16 columns on its ``mmf`` kernel and
hands 17 and more to cuBLAS (``ggml-cuda.cu``, ``mmf.cu``); on two CPU cores a 5-token pass is
compute-bound. The forward probe (``run/forwardprobe.py``) measures the curve on a run; each
engine declares the curves measured on it so far, each with where it came from (specbench.engines:
engines/measured/), and its callers hand them in (:class:`~specbench.theory.measured.engines.EngineTerms`).
In decode steps::

    v(T) = t(pass over T tokens) / t(decode step)      (C = 1; 1 at T = 1)

A blind prediction (no run) takes the verify as ``max(roofline(T), v(T) · step)``: the curve is
a floor under the roofline, which still rules where a pass is compute-bound or reads the union
of an MoE's experts. Its band (:class:`VerifyBand`) is the envelope of the curves that match the
setup (engine, backend, 16-bit or quantized weights, dense or MoE), widened by ``TRANSFER``: a
curve measured on another model of the same class is not this model's. Where no curve matches,
the central value is the roofline and the band reaches up to the highest curve measured on any
engine of the device class: not known is wide, not optimistic.

A CPU curve bounds the band from above only: a CPU verify is compute-bound at a few tokens, so
its cost follows the cores the probe had (2), which a device preset does not say; the central
value and the low end stay the roofline, which the measured matmul rate already makes
compute-bound where it is.

Between measured sizes a curve is linear; past its largest size it stays at its last value (the
roofline takes over when a long pass becomes compute-bound); below 1 token it is 1.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.theory.hardware import Gpu
from specbench.theory.measured.bands import End

# Two dense f16 CUDA curves of the same engine, a 471 MB and a 5.7 GB target on one H200,
# disagree by up to 0.10 steps at T ≤ 16 (v(9): 1.52 against 1.62), about 15 % of the extra
# cost v − 1: the spread one more model of the same class may add to an envelope.
TRANSFER = 0.15

CPU_WORDS = ("cpu", "epyc", "xeon", "graviton")
Floor = Callable[[float], float]  # tokens in the pass -> decode steps


@dataclass(frozen=True)
class VerifyCurve:
    """One measured curve: v(T) in decode steps of the engine that declares it, on ``backend`` with
    ``weights`` ("f16": 16-bit floats; "quant": anything narrower) on a ``kind`` ("dense"/"moe")
    target."""

    backend: str
    weights: str
    kind: str
    steps: tuple[tuple[int, float], ...]
    where: str
    source: str

    def __call__(self, tokens: float) -> float:
        """v(T): linear between sizes, its last value past the largest, 1 at one token or fewer."""
        sizes = [1, *(t for t, _ in self.steps if t > 1)]
        values = [1.0, *(v for t, v in self.steps if t > 1)]
        if tokens <= 1:
            return 1.0
        if tokens >= sizes[-1]:
            return values[-1]
        i = bisect.bisect_left(sizes, tokens)
        t0, t1 = sizes[i - 1], sizes[i]
        return values[i - 1] + (values[i] - values[i - 1]) * (tokens - t0) / (t1 - t0)


BACKEND_NAMES = {"cuda": "CUDA", "cpu": "CPU", "metal": "Metal", "rocm": "ROCm"}
WEIGHT_NAMES = {"f16": "f16/bf16", "quant": "quantized"}


def backend(gpu: Gpu) -> str:
    """The compute backend an engine uses on ``gpu``: cpu (the probe and the CPU presets), metal
    (Apple), rocm (AMD Instinct) or cuda."""
    name = gpu.name.lower()
    if any(w in name for w in CPU_WORDS):
        return "cpu"
    if "apple" in name:
        return "metal"
    return "rocm" if name.startswith("mi") else "cuda"


def weight_kind(bytes_per_weight: float) -> str:
    """ "f16" for 16-bit (or wider) float weights, "quant" for anything narrower (FP8, int4,
    GGUF K-quants): they run other kernels (llama.cpp CUDA: mmvq up to 8 columns, then mmq)."""
    return "f16" if bytes_per_weight >= 2.0 else "quant"


@dataclass(frozen=True)
class VerifyBand:
    """The verify cost's band for one setup (module docstring). ``matched`` are the curves of
    this engine, backend and kind of weights and model; without any, ``envelope`` holds every
    curve of the device class and the central value is the roofline (a floor of None)."""

    label: str
    matched: tuple[VerifyCurve, ...]
    envelope: tuple[VerifyCurve, ...] = ()
    upper_only: bool = False  # CPU curves bound the band from above only (module docstring)

    def floor(self, end: End | None) -> Floor | None:
        """v(T) at ``end`` of the band (None: the central value); None means the roofline alone."""
        if not self.matched:
            return _envelope_high(self.envelope) if end == "high" and self.envelope else None
        if self.upper_only and end != "high":
            return None
        return _matched(self.matched, end)

    def text(self, tokens: float) -> str:
        """``the verify cost of llama.cpp CUDA (f16/bf16, dense) at 5 tokens``."""
        return f"the verify cost of {self.label} at {tokens:g} tokens"

    def sources(self) -> str:
        used = self.matched or self.envelope
        return "; ".join(c.where for c in used) or "none measured"


def _matched(curves: tuple[VerifyCurve, ...], end: End | None) -> Floor:
    def floor(tokens: float) -> float:
        values = [c(tokens) for c in curves]
        if end is None:
            return sum(values) / len(values)
        if end == "low":
            return 1.0 + (min(values) - 1.0) * (1.0 - TRANSFER)
        return 1.0 + (max(values) - 1.0) * (1.0 + TRANSFER)

    return floor


def _envelope_high(curves: tuple[VerifyCurve, ...]) -> Floor:
    return lambda tokens: max(c(tokens) for c in curves)


def verify_band(
    name: str | None,
    own: Sequence[VerifyCurve],
    gpu: Gpu,
    bytes_per_weight: float,
    moe: bool,
    known: Sequence[VerifyCurve] = (),
) -> VerifyBand:
    """The band on ``gpu`` with these weights for the engine called ``name`` (None: unknown) whose
    curves are ``own``; ``known`` are every engine's, the envelope where none of its own matches
    (module docstring)."""
    be, weights, kind = backend(gpu), weight_kind(bytes_per_weight), "moe" if moe else "dense"
    matched = tuple(c for c in own if (c.backend, c.weights, c.kind) == (be, weights, kind))
    on = BACKEND_NAMES.get(be, be)
    label = f"{name} {on}" if name else f"an unnamed engine on {on}"
    what = f"{WEIGHT_NAMES[weights]}, {kind}"
    if matched:
        return VerifyBand(f"{label} ({what})", matched, upper_only=be == "cpu")
    cpu = be == "cpu"
    envelope = tuple(c for c in known if (c.backend == "cpu") == cpu)
    return VerifyBand(f"{label} ({what}; no curve measured)", (), envelope)
