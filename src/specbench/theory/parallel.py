"""Tensor parallelism: one forward pass split over ``n`` devices (Megatron-style).

Each device holds 1/n of every weight matrix and of the KV heads, so it reads 1/n of the bytes
and computes 1/n of the FLOPs: the pass sees ``n`` times the bandwidth and the FLOP rate. Two
all-reduces per layer (after attention and after the FFN) join the partial sums; a ring
all-reduce of ``T·h`` 16-bit activations moves ``2·(n − 1)/n · T·h·2`` bytes over the
device-to-device link and costs a fixed latency::

    t_allreduce = 2 · L · (t_ar + 2·(n − 1)/n · T·h·2 / link)

``t_ar`` (ALLREDUCE_S, 10 µs) is the small-message latency NCCL reports on NVLink (nccl-tests'
all_reduce_perf at 8 B–64 kB: ~8–15 µs on 8 × H100); the link is the preset's
``interconnect_gbs``, or its host link (PCIe) where it has none.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture
from specbench.theory.hardware import Gpu

ALLREDUCE_S = 10e-6
ACTIVATION_BYTES = 2


def tensor_parallel_device(gpu: Gpu, n: int, arch: Architecture) -> Gpu:
    """``gpu`` as ``n`` devices in tensor parallel look to one pass (module doc)."""
    if n < 1:
        raise ConfigError(f"tensor_parallel must be at least 1, got {n}")
    if n == 1:
        return gpu
    if arch.kv_heads % n and n % arch.kv_heads:
        raise ConfigError(f"tensor_parallel {n} does not divide {arch.name}'s {arch.kv_heads} KV heads")
    return replace(
        gpu,
        name=f"{gpu.name} x{n} (tensor parallel)",
        bandwidth_gbs=gpu.bandwidth_gbs * n,
        tflops=gpu.tflops * n,
        tflops_fp8=gpu.tflops_fp8 * n,
        tflops_fp4=gpu.tflops_fp4 * n,
        memory_gb=gpu.memory_gb * n,
        tensor_parallel=n,
    )


def allreduce_time(gpu: Gpu, layers: int, hidden: int, tokens: int) -> float:
    """2·L·(t_ar + 2·(n−1)/n·T·h·2 / link); 0 on one device."""
    n = gpu.tensor_parallel
    if n <= 1:
        return 0.0
    link = (gpu.interconnect_gbs or gpu.host_link_gbs) * 1e9
    moved = 2.0 * (n - 1) / n * tokens * hidden * ACTIVATION_BYTES
    return 2 * layers * (ALLREDUCE_S + moved / link)
