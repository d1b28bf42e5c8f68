"""Per-engine host costs the architecture cannot give, each fitted once and named with its source.

Every prediction starts from :class:`~specbench.theory.cost.Efficiency`'s defaults; an engine
adds the host work it is known to do per speculative round. Each value is fitted once, never per
point, and its source is given here; where nothing public or probed fixes it, it is 0 (unknown),
not guessed.

``drafted_s`` — llama-server on a CPU-only machine, per drafted token a round verifies. Beyond
the forward passes, the server puts each drafted token in the verify batch, samples and accepts
its position, and moves the KV bookkeeping; on a CPU-only machine that host work (and the client
reading the streamed tokens) runs on the cores the passes use, so it adds to the round. On the
lab MoE pair (3 ms steps) the gap between the measured and the modelled round grows with the
drafted tokens, by about 0.6–0.7 ms each, whether a draft model or an n-gram lookup drafted them
(so it is not the draft model's passes). Fitted once: the measured round of the lab MoE pair's
``draft4`` arm (8.2 ms at 3.8 drafted tokens; ``make demo`` on the 2-core VM, 2026-11-28); its
``draft8`` and ``ngram-mod`` arms, the dense pair and Gemma 3 270M are held out (docs/theory.md).
On a GPU machine the host's cores are otherwise idle, and the published RTX 3090 and A100
points need no such term, so it is 0 there; vLLM, SGLang and transformers: unknown, 0.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu

LLAMACPP_CPU_DRAFTED_S = 0.68e-3
CPU_DEVICE = "cpu"


def engine_efficiency(engine: str, gpu: Gpu, base: Efficiency | None = None) -> Efficiency:
    """``base`` (default efficiencies) with the named host costs of ``engine`` on ``gpu``."""
    eff = base or Efficiency()
    if engine == "llamacpp" and gpu.name == CPU_DEVICE:
        return replace(eff, drafted_s=LLAMACPP_CPU_DRAFTED_S)
    return eff
