"""What the theory knows of llama.cpp (llama-server), each value fitted once and named with its
source; where nothing public or probed fixes one, it is not given (unknown, with the unknown
engine's band). Its draft loop drafts γ tokens after the catch-up pass (the catch-up does not
draft), and it re-runs the accepted prefix after restoring a hybrid model's checkpoint
(theory/methods.py).

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

**Bands.** ``spec_pass_s`` 0.08–0.90 ms (the six arms' own closed-form values on the first H200
run; the range of six values is about their 14–86 % range), ``query_context_share`` 0.36–0.61
(the held-out arms above), ``drafted_s`` 0.22–0.74 ms (up to the largest per-token gap a held-out
MoE arm showed before the context term, 11 ms at 14.8 tokens; down to half the fit, a judgement:
no arm was measured below it).

**Recurrent state.** How many times each byte of a hybrid model's recurrent state crosses memory in
one pass, and each extra per-token snapshot a verify keeps — read from the source, not fitted.
The Gated DeltaNet layers (src/models/delta-net-base.cpp, build_recurrent_attn; the gather in
src/llama-graph.cpp, build_rs) gather the sequence's state rows from the cache into a scratch
tensor (``ggml_get_rows``: read + write), the op reads it and writes the new state into its
output, and a ``ggml_cpy`` writes that back into the cache (read + write): 6 moves where an
in-place update makes 2. With ``n_rs_seq = K`` snapshots (MTP, EAGLE-3, DFlash contexts) the op
writes the last min(tokens, K + 1) states and the copy moves each into its rollback slot: every
extra snapshot crosses memory 3 times, not once.

**Verify curves** (theory/measured/curves.py): v(T) in decode steps, as the forward probe measured
them, each with where it came from.
"""

from __future__ import annotations

from specbench.theory.measured.curves import VerifyCurve
from specbench.theory.measured.engines import EngineTerms, HostCost

CPU_DRAFTED_S = 0.43e-3
CPU_QUERY_CONTEXT_SHARE = 0.5
GPU_SPEC_PASS_S = 0.19e-3
LAB_CPU = "make demo on the 2-core VM, 2026-11-28 (lab MoE pair, draft4)"
LAB_H200 = "first H200 GPU-kit run, 2026-11-28 (lab dense pair, draft4)"
STATE_TRAFFIC = (6.0, 3.0)  # moves a pass, moves per extra snapshot (module docstring)

HOST_COSTS: tuple[HostCost, ...] = (
    HostCost("cpu", "drafted_s", CPU_DRAFTED_S, 0.22e-3, 0.74e-3,
             "llama-server's host work per drafted token on a CPU", LAB_CPU),
    HostCost("cpu", "query_context_share", CPU_QUERY_CONTEXT_SHARE, 0.36, 0.61,
             "the share of the step's context cost each further verified token pays (llama.cpp CPU)",
             LAB_CPU, unit="", observed=5),
    HostCost("gpu", "spec_pass_s", GPU_SPEC_PASS_S, 0.08e-3, 0.90e-3,
             "llama-server's host work per pass of a speculating slot on a GPU", LAB_H200, observed=6),
)  # fmt: skip

CURVES: tuple[VerifyCurve, ...] = (
    VerifyCurve(
        "cuda", "f16", "dense",
        ((2, 1.31), (3, 1.44), (4, 1.47), (5, 1.50), (6, 1.52), (7, 1.52), (8, 1.53), (9, 1.62),
         (13, 1.66), (15, 1.66), (16, 1.68), (17, 1.92), (25, 1.90), (33, 1.88), (49, 1.93),
         (65, 2.02)),
        "H200, lab gpu pair target (dense 4096x16, f16, 5.7 GB; memory-bound, 2.20 ms step), 2026-12-04",
        "forward probe of the GPU kit's dense run, 4 launches x 3 samples (docs/gpu.md)",
    ),
    # 16 holds 13's value: the mmf kernel runs 2–16 columns (the 5.7 GB curve above is flat
    # from 13 to 16, and the cliff call's ngram15 arm, verifying 16, ran as fast as 13 predicts)
    VerifyCurve(
        "cuda", "f16", "dense",
        ((2, 1.37), (5, 1.51), (9, 1.52), (13, 1.44), (16, 1.44), (17, 3.90)),
        "H200, lab membound target (dense 1024x16, f16, 471 MB; launch-bound, 0.81 ms step), 2026-11-28",
        "forward probe of the first H200 lease (docs/gpu.md; the cliff call read 1.49 at 13, 3.72 at 17)",
    ),
    VerifyCurve(
        "cuda", "f16", "moe",
        ((2, 1.00), (5, 1.10), (9, 1.05), (13, 1.01), (16, 1.01), (17, 2.42)),
        "H200, lab membound MoE target (768x6, 8 of 128 experts, f16, 457 MB), 2026-11-28",
        "forward probe of the first H200 lease (docs/gpu.md)",
    ),
    VerifyCurve(
        "cpu", "f16", "dense",
        ((2, 1.27), (5, 1.98), (9, 3.42), (17, 5.17)),
        "2-core VM, lab membound target (dense 1024x16, f16, 471 MB), 2026-11-28 demo",
        "forward probe of runs/demo/dense-a0.8 (docs/theory.md); more cores move it toward the roofline",
    ),
)  # fmt: skip


def terms(kind: str, name: str) -> EngineTerms:
    """llama.cpp's terms under the registry's ``kind`` and its display ``name``."""
    return EngineTerms(
        kind, name, HOST_COSTS, CURVES, state_moves=STATE_TRAFFIC, catchup_drafts=False, replays_prefix=True
    )
