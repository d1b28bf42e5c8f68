"""What drafting costs per round, by method, and the hybrid-model checkpoint.

Per round of γ drafted tokens over C sequences (t(·) is :func:`cost.forward_time`)::

    draft   γ · t(draft model, C seqs × 1 token)     its own weights and its own KV cache
    mtp     γ · t(MTP module, C × 1)                 one target-shaped layer + the shared LM head
    eagle3  γ · t(EAGLE-3 head, C × 1)               one dense layer + a 32k-token draft LM head
    dflash  1 · t(DFlash drafter, C × γ)             a 5-layer block drafter, all γ in one pass
    ngram   0                                        a CPU lookup in the context

Heads reuse target hidden states, so they carry no embedding and no recurrent state; their
one attention layer keeps a small KV cache of its own. Hybrid (Gated DeltaNet) models must save
the recurrent state before verifying and restore it when a draft token is rejected::

    t_checkpoint = C · R_total / B_ckpt · (1 + (1 − α^γ))      R_total = R_target (+ R_draft)

where B_ckpt is the host link (llama.cpp keeps checkpoints in host memory) or, in unified
memory, half the memory bandwidth (a copy reads and writes).

Replay (``replay=True``). A restored state has lost the accepted prefix; the llama.cpp build
specbench pins re-runs the a accepted tokens plus the correction through the target in one more
pass (lab-verified on a hybrid target, tests/lab)::

    t_replay = (1 − α^γ) · t(target, C × (E[a | a < γ] + 1))          hybrid targets only

It is off by default: the published M3 Max gain (a published field report) is not reproducible with it, so
builds differ. Run calibration turns it on for llama.cpp runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, recurrent_state_bytes
from specbench.theory.cost import Efficiency, ForwardCost, forward_cost, forward_time
from specbench.theory.hardware import Gpu

Method = Literal["draft", "mtp", "eagle3", "dflash", "ngram"]
METHODS: tuple[Method, ...] = ("draft", "mtp", "eagle3", "dflash", "ngram")

EAGLE3_DRAFT_VOCAB = 32000
DFLASH_LAYERS = 5


@dataclass(frozen=True)
class DraftCost:
    """Drafting time per round, one drafter pass, and the recurrent state the round must save."""

    round_s: float
    step_s: float
    step: ForwardCost | None
    state_bytes: int


def check_method(method: str) -> Method:
    for m in METHODS:
        if method.strip().lower() == m:
            return m
    raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def _active_ffn(a: Architecture) -> int:
    """Width of a dense FFN doing the work of the target's per-token FFN."""
    return a.ffn if not a.is_moe else a.top_k * a.expert_ffn + a.shared_experts * a.shared_expert_ffn


def mtp_module(a: Architecture) -> Architecture:
    """One full-attention layer shaped like the target's (MoE FFN included) + the shared LM head."""
    if a.mtp_layers <= 0:
        raise ConfigError(f"model {a.name!r} ships no MTP layers; pick another method")
    return replace(
        a, name=f"{a.name} MTP", layers=a.mtp_layers, linear_layers=0, sliding_layers=0, dense_layers=0
    )


def eagle3_head(a: Architecture) -> Architecture:
    """One dense decoder layer at the target's width and a reduced 32k draft vocabulary."""
    return _dense_drafter(a, "EAGLE-3 head", 1, EAGLE3_DRAFT_VOCAB)


def dflash_drafter(a: Architecture) -> Architecture:
    """A few dense target-width layers that denoise a whole block, reading the target LM head."""
    return _dense_drafter(a, "DFlash drafter", DFLASH_LAYERS, a.vocab)


def _dense_drafter(a: Architecture, label: str, layers: int, vocab: int) -> Architecture:
    return Architecture(
        name=f"{a.name} {label}",
        layers=layers,
        hidden=a.hidden,
        heads=a.heads,
        kv_heads=a.kv_heads,
        head_dim=a.head_dim,
        vocab=vocab,
        ffn=_active_ffn(a),
        tied_embeddings=True,
    )


@dataclass(frozen=True)
class DraftSetup:
    """Everything a method's draft cost depends on."""

    method: Method
    target: Architecture
    target_bpw: float
    draft: Architecture | None
    draft_bpw: float
    gamma: int
    seqs: int
    context: int
    replay: bool = False  # re-run the accepted prefix after a restore (hybrid targets; see module doc)


def draft_cost(s: DraftSetup, gpu: Gpu, eff: Efficiency) -> DraftCost:
    """Per-round drafting cost for ``s.method`` (see module docstring)."""
    target_state = recurrent_state_bytes(s.target)
    if s.method == "ngram":
        return DraftCost(0.0, 0.0, None, target_state)
    arch, bpw, passes, tokens = _drafter(s)
    step = forward_cost(arch, bpw, s.seqs, tokens, s.context)
    step_s = forward_time(step, gpu, eff)
    return DraftCost(passes * step_s, step_s, step, target_state + recurrent_state_bytes(arch))


def _drafter(s: DraftSetup) -> tuple[Architecture, float, int, int]:
    """(architecture, bytes/weight, passes per round, tokens per pass) of the drafter."""
    if s.method == "draft":
        if s.draft is None:
            raise ConfigError("method 'draft' needs a draft model")
        return s.draft, s.draft_bpw, s.gamma, 1
    if s.method == "mtp":
        return mtp_module(s.target), s.target_bpw, s.gamma, 1
    if s.method == "eagle3":
        return eagle3_head(s.target), s.target_bpw, s.gamma, 1
    return dflash_drafter(s.target), s.target_bpw, 1, s.gamma


def replay_tokens(alpha: float, gamma: int) -> tuple[float, float]:
    """(P(reject), tokens re-run after a restore): 1 − α^γ and E[a | a < γ] + 1, with
    P(a = i) = α^i·(1 − α) for i < γ (see the module docstring)."""
    p_reject = 1.0 - alpha**gamma
    if p_reject <= 0.0:
        return 0.0, 1.0
    mean = sum(i * alpha**i * (1.0 - alpha) for i in range(gamma)) / p_reject
    return p_reject, mean + 1.0


def checkpoint_time(state_bytes: int, seqs: int, alpha: float, gamma: int, gpu: Gpu) -> float:
    """C·R/B_ckpt·(1 + P(reject)): save every round, restore when a draft token is rejected."""
    if state_bytes == 0:
        return 0.0
    p_reject = 1.0 - alpha**gamma
    return seqs * state_bytes / gpu.checkpoint_bandwidth * (1.0 + p_reject)
