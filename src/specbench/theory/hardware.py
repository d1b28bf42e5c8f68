"""Accelerators: datasheet numbers from ``presets/gpus.yaml`` and a measured ``cpu`` entry.

The ``cpu`` probe (only when asked for) times, best of a few repetitions:

    bandwidth = 2·bytes / t_copy        (a ~256 MB float64 copy reads and writes every byte)
    flops     = 2·n³ / t_matmul         (an n×n float32 matmul)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.errors import ConfigError

PROBE_BYTES = 256 * 1024 * 1024
PROBE_REPS = 4
MATMUL_N = 1024


@dataclass(frozen=True)
class Gpu:
    """One device: bandwidth (GB/s), dense BF16 TFLOPS, memory (GB), checkpoint link (GB/s)."""

    name: str
    bandwidth_gbs: float
    tflops: float
    memory_gb: float
    unified: bool = False
    host_link_gbs: float = 13.0

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


_FIELDS = {"bandwidth_gbs", "tflops", "memory_gb", "unified", "host_link_gbs", "aliases"}


def gpu_from_mapping(name: str, data: Mapping[str, Any]) -> Gpu:
    """A Gpu from a preset mapping; missing, unknown or non-positive numbers -> ConfigError."""
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ConfigError(f"gpu {name!r}: unknown field(s) {', '.join(unknown)}")
    try:
        nums = {k: float(data[k]) for k in ("bandwidth_gbs", "tflops", "memory_gb")}
        link = float(data.get("host_link_gbs", 13.0))
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"gpu {name!r}: bad or missing number ({err})") from None
    if min(*nums.values(), link) <= 0:
        raise ConfigError(f"gpu {name!r}: numbers must be positive")
    return Gpu(name=name, unified=bool(data.get("unified", False)), host_link_gbs=link, **nums)


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
