"""Per-engine costs the architecture cannot give, each fitted once and named with its source.

Every prediction starts from :class:`~specbench.theory.cost.Efficiency`'s defaults; an engine
adds the host work it is known to do per speculative round. Each value is fitted once, never per
point, and its source is given here; where nothing public or probed fixes it, it is 0 (unknown),
not guessed.

``drafted_s`` — llama-server on a CPU-only machine, per drafted token a round verifies. Beyond
the forward passes, the server puts each drafted token in the verify batch, samples and accepts
its position, and moves the KV bookkeeping; on a CPU-only machine that host work (and the client
reading the streamed tokens) runs on the cores the passes use, so it adds to the round. On the
lab MoE pair (3 ms steps) the gap between the measured and the modelled round grows with the
drafted tokens, whether a draft model or an n-gram lookup drafted them (so it is not the draft
model's passes). Fitted once, after ``query_context_share`` below: the measured round of the lab
MoE pair's ``draft4`` arm (8.18 ms at 3.81 drafted tokens against 6.53 ms modelled without it:
0.43 ms a token; ``make demo`` on the 2-core VM, 2026-11-28); its ``draft8`` and ``ngram-mod``
arms, the dense pair and Gemma 3 270M are held out (docs/theory.md). On a GPU machine the host's
cores are otherwise idle, and the published RTX 3090 and A100 points need no such term, so it
is 0 there; vLLM, SGLang and transformers: unknown, 0.

``query_context_share`` — llama-server on a CPU-only machine. The forward probe's prefills attend
to an empty cache, so a probed verify pays the context only as the measured step does, once. On
the same demo every arm's round grew with the request's context faster than the step: per
context position, the baseline step by 3.3 µs (MoE) and 27.8 µs (dense), the MoE ``draft4``
round (4.81 tokens a pass) by 9.6 µs, i.e. each further token of the pass paid 0.50 of the
step's per-position cost again (least-squares slopes of per-request step and round on prompt +
half the output). Fitted once on that arm (0.497, kept as 0.5); held out, the same slopes give
0.36 (dense ``draft4``), 0.52 (dense ``draft8``), 0.59 (MoE ``draft8``) and 0.61 (MoE
``ngram-mod``). The rest of the step's per-position cost (the K/V read) is shared by the pass.
Elsewhere: unknown, 0.

``spec_pass_s`` — llama-server on a GPU, per target pass of a speculating slot, drafting or
not. Every pass of a slot that may draft builds the drafter's prompt and runs the drafter
through ``queue_tasks.yield_to_queue`` (tools/server/server-context.cpp), which wakes the
server's worker thread and waits for it to hand back (server-queue.cpp) — host work the baseline
never does, beside the sampling of the verified positions. On an H200 (2026-11-28 GPU kit run,
lab pairs at f16, C=1) it shows twice: the n-gram arms' requests that drafted twice in 104 passes
ran their 102 plain passes 0.24 ms (dense, 0.80 ms step) and 0.13 ms (MoE, 0.46 ms step)
slower than the baseline's steps, and the dense ``draft4`` rounds ran 0.19 ms a pass longer
than modelled. Fitted once, in closed form, on that ``draft4`` arm's replayed speedup (the
narrowest interval of the run: 0.19 ms, 95 % CI 0.11–0.27); the other five arms of the two
pairs are held out, and four of them are consistent with it (their own closed-form values 0.08–
0.53 ms, each interval containing 0.19); the MoE ``draft8`` arm is not (0.90 ms, CI 0.41–1.47:
unknown). On a CPU-only machine the hand-off is inside the fitted ``drafted_s`` (0 there);
vLLM, SGLang: unknown, 0.

``draft_pass_s`` — vLLM's EAGLE-3 proposer on a GPU, per drafting pass. vllm#20780 (Llama-3.1-8B
BF16, batch 1, H100, TPOT 7.07 ms without speculation) measured EAGLE-3 rounds that cost more than
EAGLE-1's at the same K although the EAGLE-3 head is the smaller one (a 32k-token head against the
full 128k one): TPOT × accepted length gives 10.2 ms at K = 2 against 9.0 ms modelled. The head's
shape does not explain it; vllm#17504 ("apply torch.compile & cudagraph to EAGLE3", propose time
16 → 6 ms) shows how much of that engine's EAGLE-3 proposer was host work between the passes.
Fitted once, in closed form, on the K = 2 row of vllm#20780 alone (0.62 ms per pass: the gap
divided by the K passes); its K = 3–7 rows and every other point are held out
(bench/theory_published.py). EAGLE-1 in the same table needs no such term and gets none; vLLM
on a CPU, SGLang and llama.cpp: unknown, 0.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu

LLAMACPP_CPU_DRAFTED_S = 0.43e-3
LLAMACPP_CPU_QUERY_CONTEXT_SHARE = 0.5
LLAMACPP_GPU_SPEC_PASS_S = 0.19e-3
VLLM_EAGLE3_DRAFT_PASS_S = 0.62e-3
CPU_DEVICE = "cpu"


def engine_efficiency(
    engine: str, gpu: Gpu, base: Efficiency | None = None, method: str | None = None
) -> Efficiency:
    """``base`` (default efficiencies) with the named host costs of ``engine`` on ``gpu`` for
    ``method`` (a drafting method of theory/methods.py; None: the costs every method pays)."""
    eff = base or Efficiency()
    if engine == "llamacpp" and gpu.name == CPU_DEVICE:
        eff = replace(
            eff, drafted_s=LLAMACPP_CPU_DRAFTED_S, query_context_share=LLAMACPP_CPU_QUERY_CONTEXT_SHARE
        )
    elif engine == "llamacpp":
        eff = replace(eff, spec_pass_s=LLAMACPP_GPU_SPEC_PASS_S)
    return method_efficiency(engine, gpu, eff, method) if method else eff


def method_efficiency(engine: str, gpu: Gpu, eff: Efficiency, method: str) -> Efficiency:
    """``eff`` with the host costs ``engine`` pays only for ``method`` (the others untouched,
    so a fitted round overhead survives)."""
    if engine == "vllm" and method == "eagle3" and gpu.name != CPU_DEVICE:
        return replace(eff, draft_pass_s=VLLM_EAGLE3_DRAFT_PASS_S)
    return eff
