"""Accelerators: datasheet numbers from ``presets/gpus.yaml`` and a measured ``cpu`` entry.

The ``cpu`` probe (only when asked for) times, best of a few repetitions:

    bandwidth = 2·bytes / t_copy        (a ~256 MB float64 copy reads and writes every byte)
    flops     = 2·n³ / t_matmul         (an n×n float32 matmul)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from specbench.errors import ConfigError

PROBE_BYTES = 256 * 1024 * 1024
PROBE_REPS = 4
MATMUL_N = 1024


@dataclass(frozen=True)
class Gpu:
    """One device: bandwidth (GB/s), dense BF16 TFLOPS, memory (GB), checkpoint link (GB/s).

    ``tflops_fp8`` / ``tflops_fp4`` are the dense tensor rates for FP8 and FP4 (NVFP4/MXFP4)
    weights and activations, 0 where the device has none (then the BF16 rate applies);
    ``interconnect_gbs`` is the per-direction device-to-device link (NVLink, Infinity Fabric,
    PCIe) a tensor-parallel all-reduce crosses; ``source`` is where the numbers come from.
    """

    name: str
    bandwidth_gbs: float
    tflops: float
    memory_gb: float
    unified: bool = False
    host_link_gbs: float = 13.0
    tflops_fp8: float = 0.0
    tflops_fp4: float = 0.0
    interconnect_gbs: float = 0.0
    source: str = ""
    tensor_parallel: int = 1  # devices one pass is split over (theory/parallel.py)

    def for_weights(self, quant: str) -> Gpu:
        """The device as a roofline sees it for ``quant``: FP8 weights run at the FP8 tensor
        rate, NVFP4/MXFP4 at the FP4 rate where the device has one; integer formats (GGUF,
        AWQ, GPTQ) are dequantised to 16 bits, so they keep the BF16 rate."""
        q = quant.upper().replace("-", "").replace("_", "")
        rate = self.tflops_fp4 if "FP4" in q else self.tflops_fp8 if q.startswith("FP8") else 0.0
        return replace(self, tflops=rate) if rate > 0 else self

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_gbs * 1e9

    @property
    def peak_flops(self) -> float:
        """FLOP per second."""
        return self.tflops * 1e12

    @property
    def checkpoint_bandwidth(self) -> float:
        """Bytes/s for saving or restoring a recurrent-state checkpoint.

        llama.cpp keeps checkpoints in host memory: over PCIe on a discrete GPU, and a plain
        copy (read + write, so half the bandwidth) in unified memory.
        """
        return self.bandwidth / 2 if self.unified else self.host_link_gbs * 1e9


_FIELDS = {
    "bandwidth_gbs",
    "tflops",
    "memory_gb",
    "unified",
    "host_link_gbs",
    "aliases",
    "tflops_fp8",
    "tflops_fp4",
    "interconnect_gbs",
    "source",
}
_OPTIONAL = ("tflops_fp8", "tflops_fp4", "interconnect_gbs")


def gpu_from_mapping(name: str, data: Mapping[str, Any]) -> Gpu:
    """A Gpu from a preset mapping; missing, unknown or non-positive numbers -> ConfigError."""
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ConfigError(f"gpu {name!r}: unknown field(s) {', '.join(unknown)}")
    try:
        nums = {k: float(data[k]) for k in ("bandwidth_gbs", "tflops", "memory_gb")}
        link = float(data.get("host_link_gbs", 13.0))
        extra = {k: float(data.get(k, 0.0)) for k in _OPTIONAL}
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"gpu {name!r}: bad or missing number ({err})") from None
    if min(*nums.values(), link) <= 0 or min(extra.values()) < 0:
        raise ConfigError(f"gpu {name!r}: numbers must be positive")
    unified = bool(data.get("unified", False))
    source = str(data.get("source", ""))
    return Gpu(
        name=name,
        bandwidth_gbs=nums["bandwidth_gbs"],
        tflops=nums["tflops"],
        memory_gb=nums["memory_gb"],
        unified=unified,
        host_link_gbs=link,
        tflops_fp8=extra["tflops_fp8"],
        tflops_fp4=extra["tflops_fp4"],
        interconnect_gbs=extra["interconnect_gbs"],
        source=source,
    )


def _best_time(fn: Callable[[], object], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def probe_cpu(size_bytes: int = PROBE_BYTES, reps: int = PROBE_REPS) -> Gpu:
    """Measure this machine: copy bandwidth and float32 matmul rate (best of ``reps``)."""
    src = np.ones(size_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    t_copy = _best_time(lambda: np.copyto(dst, src), reps)
    a = np.ones((MATMUL_N, MATMUL_N), dtype=np.float32)
    t_mm = _best_time(lambda: a @ a, reps)
    memory_gb = _memory_gb()
    bandwidth_gbs = 2 * src.nbytes / t_copy / 1e9
    return Gpu(
        name="cpu",
        bandwidth_gbs=bandwidth_gbs,
        tflops=2 * MATMUL_N**3 / t_mm / 1e12,
        memory_gb=memory_gb,
        unified=True,
        host_link_gbs=bandwidth_gbs,
    )


def _memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return 0.0
