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
full 128k one): TPOT × accepted length gives 10.2 ms at K = 2 against 8.5 ms modelled (the catch-up pass
drafting the first token, theory/methods.py). The head's
shape does not explain it; vllm#17504 ("apply torch.compile & cudagraph to EAGLE3", propose time
16 → 6 ms) shows how much of that engine's EAGLE-3 proposer was host work between the passes.
Fitted once, in closed form, on the K = 2 row of vllm#20780 alone (0.87 ms per pass: the gap
divided by the K passes the proposer runs); its K = 3–7 rows and every other point are held out
(bench/theory_published.py). EAGLE-1 in the same table needs no such term and gets none; vLLM
on a CPU, SGLang and llama.cpp: unknown, 0.

**Bands.** Each value carries the band the interval of a prediction uses (theory/spread/interval.py),
from the same evidence: ``spec_pass_s`` 0.08–0.90 ms (the six arms' own closed-form values on
the first H200 run; the range of six values is about their 14–86 % range), ``draft_pass_s``
0.56–0.87 ms (the closed-form value of each K = 2–7 row of vllm#20780), ``query_context_share``
0.36–0.61 (the held-out arms above), ``drafted_s`` 0.22–0.74 ms (up to the largest per-token gap
a held-out MoE arm showed before the context term, 11 ms at 14.8 tokens; down to half the fit,
a judgement: no arm was measured below it). An engine with none of these for the device and
method pays ``round_s`` with the band of :data:`UNKNOWN_ROUND`: from none up to the most any
engine was measured to spend per round on that kind of device.

Each entry names the one source it was fitted on (``fitted_on``), so a validation can drop the
entries fitted on the source it holds out (bench/theory_published.py, leave-one-source-out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu
from specbench.theory.measured.bands import observed_band

LLAMACPP_CPU_DRAFTED_S = 0.43e-3
LLAMACPP_CPU_QUERY_CONTEXT_SHARE = 0.5
LLAMACPP_GPU_SPEC_PASS_S = 0.19e-3
VLLM_EAGLE3_DRAFT_PASS_S = 0.87e-3
CPU_DEVICE = "cpu"
VLLM_EAGLE = "https://github.com/vllm-project/vllm/issues/20780"
LAB_CPU = "make demo on the 2-core VM, 2026-11-28 (lab MoE pair, draft4)"
LAB_H200 = "first H200 GPU-kit run, 2026-11-28 (lab dense pair, draft4)"

Device = Literal["gpu", "cpu"]


@dataclass(frozen=True)
class HostCost:
    """One named engine cost: ``field`` of :class:`Efficiency` for ``engine`` on a ``device``
    (and only for ``method`` when given), its fitted value, its band and the one source it was
    fitted on."""

    engine: str
    device: Device
    field: str
    value: float
    low: float
    high: float
    label: str
    fitted_on: str
    method: str | None = None
    unit: str = "ms"
    observed: int = 0  # how many measured values span low–high (0: a judgement, used as it is)

    def band(self) -> tuple[float, float]:
        """The 80 % band: ``low``–``high`` widened to the prediction range of one more
        observation when they are the range of ``observed`` values (theory/spread/interval.py)."""
        ceiling = 1.0 if self.unit == "" else math.inf
        return observed_band(self.low, self.high, self.observed, 0.0, ceiling)

    @property
    def display(self) -> float:
        return 1e3 if self.unit == "ms" else 1.0


HOST_COSTS: tuple[HostCost, ...] = (
    HostCost("llamacpp", "cpu", "drafted_s", LLAMACPP_CPU_DRAFTED_S, 0.22e-3, 0.74e-3,
             "llama-server's host work per drafted token on a CPU", LAB_CPU),
    HostCost("llamacpp", "cpu", "query_context_share", LLAMACPP_CPU_QUERY_CONTEXT_SHARE, 0.36, 0.61,
             "the share of the step's context cost each further verified token pays (llama.cpp CPU)",
             LAB_CPU, unit="", observed=5),
    HostCost("llamacpp", "gpu", "spec_pass_s", LLAMACPP_GPU_SPEC_PASS_S, 0.08e-3, 0.90e-3,
             "llama-server's host work per pass of a speculating slot on a GPU", LAB_H200, observed=6),
    HostCost("vllm", "gpu", "draft_pass_s", VLLM_EAGLE3_DRAFT_PASS_S, 0.56e-3, 0.87e-3,
             "vLLM's EAGLE-3 proposer host work per drafting pass", VLLM_EAGLE, method="eagle3",
             observed=6),
)  # fmt: skip

# No named cost for the engine, device and method: the host work per round is not known. The
# band runs from none to the most measured per round on that kind of device: 0.90 ms, the lab
# MoE pair's draft8 arm on the first H200 run (llama-server), and 3.7 ms, llama-server's round
# on the 2-core VM's MoE pair before drafted_s (--fit-arm draft4; docs/theory.md).
UNKNOWN_ROUND = {
    "gpu": HostCost("*", "gpu", "round_s", 1.0e-4, 0.0, 0.90e-3,
                    "host work per round of an engine with no measured host cost (GPU)", "none"),
    "cpu": HostCost("*", "cpu", "round_s", 1.0e-4, 0.0, 3.7e-3,
                    "host work per round of an engine with no measured host cost (CPU)", "none"),
}  # fmt: skip

# ... and its host work per drafting pass, for the same engines. Every proposer is a host loop
# over its drafting passes (vLLM's ``EagleProposer.propose`` runs ``num_speculative_tokens − 1``
# Python iterations, each preparing positions, slot mappings and attention metadata before it
# launches the head; llama.cpp's ``common_speculative`` draft loop samples on the host after each
# pass), and both host costs measured so far are per pass, not per round (``spec_pass_s``,
# ``draft_pass_s`` above). The band runs from none to the most measured per pass on that kind
# of device: 0.90 ms a pass on a GPU (the same H200 arm as above; with ``draft_pass_s`` of
# vllm#20780 left out, nothing measured is higher), 0.74 ms a drafted token on a CPU (the top of
# ``drafted_s``'s band). Central value 0: unknown, not guessed.
UNKNOWN_PASS = {
    "gpu": HostCost("*", "gpu", "draft_pass_s", 0.0, 0.0, 0.90e-3,
                    "host work per drafting pass of an engine with no measured host cost (GPU)", "none"),
    "cpu": HostCost("*", "cpu", "draft_pass_s", 0.0, 0.0, 0.74e-3,
                    "host work per drafting pass of an engine with no measured host cost (CPU)", "none"),
}  # fmt: skip


# How many times each byte of a hybrid model's recurrent state crosses memory in one pass, and
# each extra per-token snapshot a verify keeps — engine facts read from the source, not fitted.
# llama.cpp's Gated DeltaNet layers (src/models/delta-net-base.cpp, build_recurrent_attn; the
# gather in src/llama-graph.cpp, build_rs) gather the sequence's state rows from the cache into a
# scratch tensor (``ggml_get_rows``: read + write), the op reads it and writes the new state into
# its output, and a ``ggml_cpy`` writes that back into the cache (read + write): 6 moves where an
# in-place update makes 2. With ``n_rs_seq = K`` snapshots (MTP, EAGLE-3, DFlash contexts) the op
# writes the last min(tokens, K + 1) states and the copy moves each into its rollback slot: every
# extra snapshot crosses memory 3 times, not once. Engines not listed update in place (2, 1):
# vLLM's and SGLang's fused recurrent kernels read and write the state through slot indices.
STATE_TRAFFIC = {"llamacpp": (6.0, 3.0)}


def state_traffic(engine: str | None, eff: Efficiency) -> Efficiency:
    """``eff`` with ``engine``'s recurrent-state traffic (:data:`STATE_TRAFFIC`); unchanged for
    an engine that updates the state in place or is not known."""
    moves = STATE_TRAFFIC.get(engine or "")
    return replace(eff, state_moves=moves[0], snapshot_moves=moves[1]) if moves else eff


# Engines whose proposer drafts the first token in the catch-up pass over the verified batch
# (theory/methods.py): a round runs γ − 1 further drafting passes there, γ in llama.cpp.
CATCHUP_DRAFTS = ("vllm", "sglang")


def catchup_drafts(engine: str | None) -> bool:
    """Whether ``engine``'s catch-up pass also drafts the first token (None: not known, no)."""
    return engine in CATCHUP_DRAFTS


def device_kind(gpu: Gpu) -> Device:
    """ "cpu" for the measured ``cpu`` device (the runner's probe), "gpu" for every preset."""
    return "cpu" if gpu.name == CPU_DEVICE else "gpu"


def host_costs(
    engine: str | None, gpu: Gpu, method: str | None, costs: Sequence[HostCost] = HOST_COSTS
) -> list[HostCost]:
    """The named costs ``engine`` pays on ``gpu`` for ``method`` (None: those every method pays)."""
    kind = device_kind(gpu)
    return [
        c
        for c in costs
        if c.engine == engine and c.device == kind and (c.method is None or c.method == method)
    ]


def engine_efficiency(
    engine: str,
    gpu: Gpu,
    base: Efficiency | None = None,
    method: str | None = None,
    costs: Sequence[HostCost] = HOST_COSTS,
) -> Efficiency:
    """``base`` (default efficiencies) with the named host costs of ``engine`` on ``gpu`` for
    ``method`` (a drafting method of theory/methods.py; None: the costs every method pays) and
    the engine's recurrent-state traffic (:data:`STATE_TRAFFIC`)."""
    eff = state_traffic(engine, base or Efficiency())
    for c in host_costs(engine, gpu, None, costs):
        eff = replace(eff, **{c.field: c.value})
    return method_efficiency(engine, gpu, eff, method, costs) if method else eff


def method_efficiency(
    engine: str, gpu: Gpu, eff: Efficiency, method: str, costs: Sequence[HostCost] = HOST_COSTS
) -> Efficiency:
    """``eff`` with the host costs ``engine`` pays only for ``method`` (the others untouched,
    so a fitted round overhead survives)."""
    for c in host_costs(engine, gpu, method, costs):
        if c.method is not None:
            eff = replace(eff, **{c.field: c.value})
    return eff
