"""Bytes, FLOPs and time of one forward pass (a decode step, a verify, a draft step).

A forward pass over ``s`` sequences with ``t`` new tokens each (T = s·t tokens) moves

    weights  = bpw/8 · (always-read + L_moe · N(T) · expert)     routed experts: union over T tokens
               + (bpw_head − bpw)/8 · V·h                       a head stored in its own format
    KV       = s · KV(context) + T · KV(1)                       read the cache, write the new rows
    state    = s · moves · R                                     recurrent state: read and written
                                                                 (moves = 2), more where the engine
                                                                 stages it (Efficiency.state_moves)
    bytes    = weights + KV + state

and computes ``FLOPs = T · (2·active + attention(context))`` where one token's attention over
``n`` cached positions costs 4·H·d·n per full-attention layer (QKᵀ and PV) and a Gated DeltaNet
update ~6·Hv·dk·dv. The roofline time adds a fixed launch latency per kernel and per pass::

    t = max(bytes / (BW·η_bw), FLOPs / (peak·η_c)) + kernels · t_kernel + t_forward

``bound`` says which term of the max won. Activations, norms and sampling are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specbench.errors import ConfigError
from specbench.theory.arch import (
    Architecture,
    active_params,
    always_read_params,
    expert_params,
    kv_cache_bytes,
    lm_head_params,
    recurrent_state_bytes,
)
from specbench.theory.formulas import experts_touched
from specbench.theory.hardware import Gpu
from specbench.theory.parallel import allreduce_time

Bound = Literal["bandwidth", "compute"]

# Kernels a llama.cpp-style graph launches per block (order of magnitude, counted from the
# qwen35/qwen35moe/llama graphs: norms, projections, rope, attention, gates, residual adds).
KERNELS_ATTENTION = 16
KERNELS_LINEAR = 24
KERNELS_DENSE_FFN = 7
KERNELS_MOE_FFN = 22
KERNELS_HEAD = 4
LOGIT_BYTES = 4  # f32 logits copied to the host per vocabulary entry


@dataclass(frozen=True)
class Efficiency:
    """Fractions of datasheet peaks a real engine reaches, and its fixed latencies.

    bandwidth  η_bw, share of peak memory bandwidth a decode pass streams at
    compute    η_c, share of dense BF16 peak a large verify batch reaches
    kernel_s   fixed latency per launched kernel (small-batch kernels are latency-bound)
    forward_s  fixed host cost per forward pass (graph launch, synchronise)
    round_s    fixed host cost per speculative round (draft bookkeeping, acceptance)
    vocab_s    host time per vocabulary entry per sampled position (see :func:`sampling_time`)
    drafted_s  host time per drafted token a round verifies (batch entry, sampling and accept
               of its position, KV bookkeeping), beyond the forward passes (each engine's, engines/measured/)
    draft_pass_s  host time per drafting pass beyond its forward pass (the engine's proposer
               loop between two drafter passes; engines/measured/)
    spec_pass_s  host time per target pass of a speculating server, beyond the baseline's step:
               a drafting round pays it once, and so does every pass that tried to draft and
               found nothing (engines/measured/)
    query_context_share  share of a decode step's cost per context position that each further
               token of a pass pays again (attention scores and weighted sums per query); the
               rest, the K/V read, is paid once per pass. Used with a measured step context
               slope (predict's ``step_context_slope_s``); 0: unknown (engines/measured/)
    state_moves  times each byte of a sequence's recurrent state crosses memory in one pass: 2
               (read and written in place) unless the engine is known to stage it; llama.cpp
               gathers it into a scratch tensor and copies the op's result back, 6
               (``EngineTerms.state_moves``, theory/measured/engines.py)
    snapshot_moves  times each extra per-token state snapshot a verify keeps crosses memory: 1
               (written once), llama.cpp 3 (written by the op, then copied into the cache)
    """

    bandwidth: float = 0.6
    compute: float = 0.5
    kernel_s: float = 2.0e-6
    forward_s: float = 2.0e-4
    round_s: float = 1.0e-4
    vocab_s: float = 1.5e-9
    drafted_s: float = 0.0
    draft_pass_s: float = 0.0
    spec_pass_s: float = 0.0
    query_context_share: float = 0.0
    state_moves: float = 2.0
    snapshot_moves: float = 1.0

    def __post_init__(self) -> None:
        if not (0.0 < self.bandwidth <= 1.0 and 0.0 < self.compute <= 1.0):
            raise ConfigError("efficiency bandwidth and compute must be within (0, 1]")
        if not 0.0 <= self.query_context_share <= 1.0:
            raise ConfigError("efficiency query_context_share must be within [0, 1]")
        if self.state_moves < 2.0 or self.snapshot_moves < 1.0:
            raise ConfigError("efficiency state_moves must be >= 2 and snapshot_moves >= 1")
        if (
            min(
                self.kernel_s,
                self.forward_s,
                self.round_s,
                self.vocab_s,
                self.drafted_s,
                self.draft_pass_s,
                self.spec_pass_s,
            )
            < 0.0
        ):
            raise ConfigError(
                "efficiency latencies (kernel_s, forward_s, round_s, vocab_s, drafted_s, draft_pass_s,"
                " spec_pass_s) must not be negative"
            )


@dataclass(frozen=True)
class ForwardCost:
    """What one forward pass moves and computes."""

    tokens: int
    weight_bytes: float
    cache_bytes: float
    flops: float
    kernels: int
    experts_touched: float
    layers: int = 0  # for the tensor-parallel all-reduces (theory/parallel.py)
    hidden: int = 0
    state_bytes: float = 0.0  # recurrent state of all sequences, one copy (in cache_bytes twice)

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.cache_bytes


def kernel_count(a: Architecture) -> int:
    """Kernels per forward pass: Σ over blocks of their launch counts, plus the head."""
    mixers = a.attention_layers * KERNELS_ATTENTION + a.linear_layers * KERNELS_LINEAR
    ffns = a.dense_ffn_layers * KERNELS_DENSE_FFN + a.moe_layers * KERNELS_MOE_FFN
    return mixers + ffns + KERNELS_HEAD


def attention_flops_per_token(a: Architecture, context: int) -> float:
    """4·H·d·n_eff per full-attention layer (MLA, absorbed: 2·H·(2·r_kv + d_rope)·n_eff) plus
    ~6·Hv·dk·dv per Gated DeltaNet layer."""
    full = a.attention_layers - a.sliding_layers
    positions = full * context + a.sliding_layers * min(context, a.sliding_window)
    linear = 6 * a.linear_layers * a.linear_value_heads * a.linear_key_dim * a.linear_value_dim
    per_position = (
        2 * a.heads * (2 * a.kv_lora_rank + a.qk_rope_dim) if a.is_mla else 4 * a.heads * a.head_dim
    )
    return float(per_position) * positions + linear


def forward_cost(
    a: Architecture,
    bytes_per_weight: float,
    seqs: int,
    tokens: int,
    context: int,
    head_bytes_per_weight: float | None = None,
) -> ForwardCost:
    """Cost of one pass over ``seqs`` sequences with ``tokens`` new tokens each (see module doc).

    ``head_bytes_per_weight``: the LM head's own format where the file keeps it apart from the
    body (llama.cpp's K-quant mixes store ``output.weight`` as Q6_K, theory/presets/quants.yaml);
    None: the body's.
    """
    total = seqs * tokens
    touched = experts_touched(a.experts, a.top_k, total)
    params = always_read_params(a) + a.moe_layers * touched * expert_params(a)
    head_extra = 0.0
    if head_bytes_per_weight is not None:
        head_extra = lm_head_params(a) * (head_bytes_per_weight - bytes_per_weight)
    kv = seqs * kv_cache_bytes(a, context) + total * kv_cache_bytes(a, 1)
    state = seqs * 2 * recurrent_state_bytes(a)
    flops = total * (2.0 * active_params(a) + attention_flops_per_token(a, context))
    weights = params * bytes_per_weight + head_extra
    return ForwardCost(
        total, weights, kv + state, flops, kernel_count(a), touched, a.layers, a.hidden, state / 2
    )


def moved_bytes(cost: ForwardCost, eff: Efficiency) -> float:
    """The pass's bytes with the recurrent state moved ``eff.state_moves`` times, not twice."""
    return cost.bytes + (eff.state_moves - 2.0) * cost.state_bytes


def roofline(cost: ForwardCost, gpu: Gpu, eff: Efficiency) -> tuple[float, Bound]:
    """max(bytes/(BW·η_bw), FLOPs/(peak·η_c)) and which side bound it."""
    t_mem = moved_bytes(cost, eff) / (gpu.bandwidth * eff.bandwidth)
    t_flop = cost.flops / (gpu.peak_flops * eff.compute)
    return (t_mem, "bandwidth") if t_mem >= t_flop else (t_flop, "compute")


def sampling_time(
    a: Architecture, copied: float, gpu: Gpu, eff: Efficiency, sampled: float | None = None
) -> float:
    """Host sampling: ``copied · V · 4 / B_link + sampled · V · vocab_s``.

    llama-server samples the target on the host: a pass copies the V f32 logits of each of its
    ``copied`` output positions over the host link, and each position the sampler reaches builds
    a V-entry candidate array before the sampler chain runs (``common/sampling.cpp``,
    ``set_logits``). A verify copies C·(γ+1) rows but samples only up to the first rejection,
    C·τ positions (``sampled``, default ``copied``). On a 248k-token vocabulary that is ~0.45 ms
    a position on a PCIe 4.0 GPU, a sixth of a 3B-active MoE's decode step. ``vocab_s`` (1.5 ns:
    ~16 bytes written and read per entry by one host core) is the host's, not the architecture's.
    """
    n = copied if sampled is None else sampled
    return a.vocab * (copied * LOGIT_BYTES / gpu.checkpoint_bandwidth + n * eff.vocab_s)


def head_share(a: Architecture, context: int) -> float:
    """LM-head work of one output row per unit of body work of one token: ``V·h / body``.

    ``body = active − V·h + attention(context)/2`` (weights-equivalent). A prefill computes the
    LM head for its last token only (llama.cpp selects the output rows, ``inp_out_ids``, before
    the head), a verify for every one of its γ+1 tokens. So a pass curve measured on prefills
    (:mod:`specbench.theory.passcurve`) misses ``γ+1 − C`` head rows, each costing this share of
    a body token's marginal time; on Gemma 3 270M (262,144 × 640 head, 100M body) that is 1.7.
    """
    head = lm_head_params(a)
    body = active_params(a) - head + attention_flops_per_token(a, context) / 2
    return head / body if body > 0 else 0.0


def forward_time(cost: ForwardCost, gpu: Gpu, eff: Efficiency) -> float:
    """Roofline time plus fixed latencies: kernels·t_kernel + t_forward (+ tensor-parallel
    all-reduces, theory/parallel.py)."""
    fixed = cost.kernels * eff.kernel_s + eff.forward_s
    return roofline(cost, gpu, eff)[0] + fixed + allreduce_time(gpu, cost.layers, cost.hidden, cost.tokens)
