"""What drafting costs per round, by method, and the hybrid-model checkpoint.

Per round of γ drafted tokens over C sequences (t(·) is :func:`cost.forward_time`)::

    draft   γ · t(draft model, C seqs × 1 token)     its own weights and its own KV cache
    mtp     γ · t(MTP module, C × 1)                 one target-shaped layer + the shared LM head
    eagle3  γ · t(EAGLE-3 head, C × 1)               one dense layer + a 32k-token draft LM head
    eagle   γ · t(EAGLE-1/2 head, C × 1)             one dense layer + the target's LM head (full vocabulary)
    dflash  1 · t(DFlash drafter, C × γ)             a 5-layer block drafter, all γ in one pass
    ngram   0                                        a CPU lookup in the context

Every model drafter also re-runs the verified batch (C × (γ+1) tokens) through itself once per
round: the pinned llama.cpp mirrors each target batch into the drafter (``process``), which for an
MTP, EAGLE-3 or DFlash head is the *catch-up pass* over the target's hidden states of the tokens
just verified, and for a separate draft model the re-evaluation of the drafted tokens after its
cache was cut back (``TAG_SPEC_AVOID_DRAFT_REEVAL`` upstream)::

    t_catchup = t(drafter, C × (γ+1))                      0 for ngram

Heads reuse target hidden states, so they carry no embedding and no recurrent state; their
one attention layer keeps a small KV cache of its own.

vLLM's and SGLang's proposers fold the catch-up into the first drafting pass: the head runs over
the verified tokens' hidden states and drafts the first token from the last of them (vLLM
``EagleProposer.propose``: one forward over the new tokens, then ``num_speculative_tokens − 1``
more; SGLang ``forward_draft_extend_after_decode`` gives the first level's top-k, ``draft`` runs
the other ``num_steps − 1``). A round there runs the catch-up and γ − 1 drafting passes
(``catchup_drafts``: each engine's ``EngineTerms`` says it), the pinned llama.cpp the catch-up and γ.

Recurrent state (hybrid, Gated DeltaNet models) cannot drop a rejected token, and llama.cpp
handles it two ways:

- **Snapshots** (``mtp``, ``eagle3``, ``dflash``): the target context keeps K per-token state
  snapshots on the device (``n_rs_seq = K``), so a rejection is an index move. The verify pass
  writes the extra K snapshots, each ``snapshot_moves`` times (llama.cpp: written by the op and
  copied into the cache, 3; ``EngineTerms.state_moves``)::

      t_snapshot = C · γ · R_target · snapshot_moves / (BW · η_bw)

- **Host checkpoints** (``draft``, ``ngram``): the state is copied to host memory before the
  verify, and copied back when a draft token is rejected::

      t_checkpoint_target = C · R_target / B_ckpt · (1 + P_reject)      P_reject = 1 − α^γ

  A hybrid *draft model* is saved before it drafts and restored after (its drafted tokens must
  leave its state), and restored again when the target rejects::

      t_checkpoint_draft  = C · R_draft / B_ckpt · (2 + P_reject)

B_ckpt is the host link (PCIe from pageable memory) or, in unified memory, half the memory
bandwidth (a copy reads and writes).

Replay (``replay=True``, host-checkpoint methods only). A restored state has lost the accepted
prefix; the pinned llama.cpp re-runs the a accepted tokens plus the correction through the
target in one more pass, which the drafter mirrors like every target batch (lab-verified on a
hybrid target, tests/lab)::

    t_replay = P_reject · (t(target, C × m) + t(drafter, C × m))      m = E[a | a < γ] + 1

Draft sampling. The pinned build samples a draft model on the device (``--spec-draft-backend-
sampling``, on by default). Builds before it copied each drafted position's logits to the host
and built a V-entry candidate array there, like the target's sampling (:func:`cost.sampling_time`);
``draft_host_sampling=True`` adds that to every drafting pass.

Draft launch. Each drafter pass (γ drafting passes and the catch-up) pays the fixed latencies of
its own graph, ``kernels_draft · t_kernel + t_forward``; ``launch_s`` reports that share of the
drafting time. The architecture gives the kernel count, not the per-kernel or per-pass host
latency: those are the engine's, fitted by ``--fit-arm`` through the per-round overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, recurrent_state_bytes
from specbench.theory.cost import Efficiency, ForwardCost, forward_cost, forward_time, sampling_time
from specbench.theory.hardware import Gpu

Method = Literal["draft", "mtp", "eagle3", "eagle", "dflash", "ngram"]
METHODS: tuple[Method, ...] = ("draft", "mtp", "eagle3", "eagle", "dflash", "ngram")

EAGLE3_DRAFT_VOCAB = 32000
DFLASH_LAYERS = 5


@dataclass(frozen=True)
class DraftCost:
    """One round's drafting: γ drafter passes, the catch-up pass, and the state the round keeps.

    ``round_s`` is the γ drafting passes, ``catchup_s`` the pass over the verified batch,
    ``launch_s`` the fixed-latency share of both, ``host_s`` the engine's host work between the
    drafting passes (part of ``round_s``, ``Efficiency.draft_pass_s`` per pass);
    ``target_state``/``draft_state`` are the recurrent-state bytes per sequence of the target
    and of a hybrid draft model.
    """

    round_s: float
    step_s: float
    step: ForwardCost | None
    target_state: int
    draft_state: int = 0
    catchup_s: float = 0.0
    launch_s: float = 0.0
    host_s: float = 0.0

    @property
    def state_bytes(self) -> int:
        return self.target_state + self.draft_state


def check_method(method: str) -> Method:
    for m in METHODS:
        if method.strip().lower() == m:
            return m
    raise ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def _active_ffn(a: Architecture) -> int:
    """Width of a dense FFN doing the work of the target's per-token FFN."""
    return a.ffn if not a.is_moe else a.top_k * a.expert_ffn + a.shared_experts * a.shared_expert_ffn


def mtp_module(a: Architecture) -> Architecture:
    """One full-attention layer shaped like the target's (MoE FFN included) + the shared LM head,
    after its ``eh_proj`` (2h → h) that joins the token's embedding to the previous hidden state,
    every pass (llama.cpp ``nextn.eh_proj``; vLLM ``qwen3_next_mtp.py`` ``fc``, 2·h → h)."""
    if a.mtp_layers <= 0:
        raise ConfigError(f"model {a.name!r} ships no MTP layers; pick another method")
    return replace(
        a,
        name=f"{a.name} MTP",
        layers=a.mtp_layers,
        linear_layers=0,
        sliding_layers=0,
        dense_layers=0,
        input_params=a.mtp_layers * 2 * a.hidden * a.hidden,
    )


def eagle3_head(a: Architecture) -> Architecture:
    """One dense decoder layer at the target's width and a reduced 32k draft vocabulary. Its
    q/k/v read [embedding; hidden], 2h wide, every pass, and its ``fc`` (3h → h) fuses three of
    the target's hidden states on the catch-up pass only; both engines keep that fc whole on
    every tensor-parallel rank (SGLang ``llama_eagle3.py``: ``torch.nn.Linear``, ``QKVParallelLinear(2 *
    hidden_size, ...)``; vLLM ``llama_eagle3.py``: ``ReplicatedLinear``)."""
    head = _dense_drafter(a, "EAGLE-3 head", 1, EAGLE3_DRAFT_VOCAB)
    wider_qkv = a.hidden * (a.heads + 2 * a.kv_heads) * a.head_dim
    return replace(head, input_params=wider_qkv, fuse_params=3 * a.hidden * a.hidden)


def eagle_head(a: Architecture) -> Architecture:
    """EAGLE-1/2: one dense decoder layer at the target's width that reads the target's own LM
    head (the whole vocabulary) every drafting pass, after its ``fc`` (2h → h) joins the token's
    embedding to the feature, every pass (vLLM ``llama_eagle.py``; EAGLE ``cnets.py``)."""
    head = _dense_drafter(a, "EAGLE head", 1, a.vocab)
    return replace(head, input_params=2 * a.hidden * a.hidden)


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
    draft_host_sampling: bool = False  # builds that sample a draft model on the host (module doc)
    tree_top_k: int = 1  # a tree draft expands this many candidates per drafting pass (1: a chain)
    tree_tokens: int = 0  # draft tokens a tree verifies (0: a chain's γ)
    catchup_drafts: bool = False  # the catch-up pass drafts the first token (vLLM, SGLang; module doc)
    target_head_bpw: float | None = None  # LM head bytes/weight where the format keeps its own (cost.py)
    draft_head_bpw: float | None = None

    @property
    def verify_width(self) -> int:
        """Tokens per sequence in the verify pass: a chain's γ + 1, a tree's draft tokens + 1."""
        return (self.tree_tokens or self.gamma) + 1


def snapshots(method: Method) -> bool:
    """Whether the pinned llama.cpp rolls a hybrid target back by per-token snapshots on the
    device (MTP/EAGLE-3/DFlash: ``n_rs_seq = K``) rather than a host checkpoint (draft, ngram)."""
    return method in ("mtp", "eagle3", "eagle", "dflash")


def draft_cost(s: DraftSetup, gpu: Gpu, eff: Efficiency) -> DraftCost:
    """Per-round drafting cost for ``s.method`` (see module docstring)."""
    target_state = recurrent_state_bytes(s.target)
    if s.method == "ngram":
        return DraftCost(0.0, 0.0, None, target_state)
    arch, bpw, head_bpw, passes, tokens = _drafter(s)
    step = forward_cost(arch, bpw, s.seqs, tokens, s.context, head_bpw)
    step_s = forward_time(step, gpu, eff)
    if s.draft_host_sampling and s.method == "draft":
        step_s += sampling_time(arch, s.seqs, gpu, eff)
    catchup_s = catchup_time(s, gpu, eff, s.gamma + 1)  # the accepted path, not the whole tree
    fixed = step.kernels * eff.kernel_s + eff.forward_s
    own_state = recurrent_state_bytes(arch) if s.method == "draft" else 0
    host_s = passes * eff.draft_pass_s  # the engine's proposer loop, once per drafting pass
    # the proposer loop's host work is per pass it runs, the catch-up that drafts included
    forwards = passes - 1 if s.catchup_drafts and s.method != "dflash" else passes
    launch_s = (forwards + 1) * fixed
    return DraftCost(
        forwards * step_s + host_s, step_s, step, target_state, own_state, catchup_s, launch_s, host_s
    )


def catchup_time(s: DraftSetup, gpu: Gpu, eff: Efficiency, tokens: float) -> float:
    """t(drafter, C × tokens): the drafter's pass over a batch the target ran (0 for ngram)."""
    if s.method == "ngram":
        return 0.0
    arch, bpw, head_bpw, _, _ = _drafter(s)
    low = max(1, int(tokens))
    times = [
        forward_time(forward_cost(arch, bpw, s.seqs, t, s.context, head_bpw), gpu, eff)
        for t in (low, low + 1)
    ]
    w = tokens - low
    # EAGLE-3's fc, whole on each rank: each reads all of it at its own (1/n) bandwidth
    fuse_s = arch.fuse_params * bpw * max(1, gpu.tensor_parallel) / (gpu.bandwidth * eff.bandwidth)
    return (1 - w) * times[0] + w * times[1] + fuse_s


def _drafter(s: DraftSetup) -> tuple[Architecture, float, float | None, int, int]:
    """(architecture, bytes/weight, LM-head bytes/weight, passes per round, tokens per pass) of
    the drafter. MTP reads the target's own head; EAGLE heads and DFlash are stored like the
    target (their own files, so no head type of a GGUF mix: None unless they share the target's)."""
    if s.method == "draft":
        if s.draft is None:
            raise ConfigError("method 'draft' needs a draft model")
        return s.draft, s.draft_bpw, s.draft_head_bpw, s.gamma, 1
    if s.method == "mtp":
        return mtp_module(s.target), s.target_bpw, s.target_head_bpw, s.gamma, s.tree_top_k
    if s.method == "eagle3":
        return eagle3_head(s.target), s.target_bpw, None, s.gamma, s.tree_top_k
    if s.method == "eagle":
        return eagle_head(s.target), s.target_bpw, s.target_head_bpw, s.gamma, s.tree_top_k
    return dflash_drafter(s.target), s.target_bpw, s.target_head_bpw, 1, s.gamma


def replay_tokens(alpha: float, gamma: int) -> tuple[float, float]:
    """(P(reject), tokens re-run after a restore): 1 − α^γ and E[a | a < γ] + 1, with
    P(a = i) = α^i·(1 − α) for i < γ (see the module docstring)."""
    p_reject = 1.0 - alpha**gamma
    if p_reject <= 0.0:
        return 0.0, 1.0
    mean = sum(i * alpha**i * (1.0 - alpha) for i in range(gamma)) / p_reject
    return p_reject, mean + 1.0


def checkpoint_time(drafting: DraftCost, s: DraftSetup, alpha: float, gpu: Gpu) -> tuple[float, float]:
    """(target, draft) host-checkpoint seconds per round (module docstring); the target's is 0
    for snapshot methods, which :func:`snapshot_time` costs instead."""
    p_reject = 1.0 - alpha**s.gamma
    link = gpu.checkpoint_bandwidth
    target = 0.0 if snapshots(s.method) else s.seqs * drafting.target_state / link * (1.0 + p_reject)
    draft = s.seqs * drafting.draft_state / link * (2.0 + p_reject)
    return target, draft


def snapshot_time(s: DraftSetup, gpu: Gpu, eff: Efficiency) -> float:
    """C · γ · R_target · moves / (BW · η_bw): the per-token state snapshots a snapshot method's
    verify writes, each crossing memory ``eff.snapshot_moves`` times (llama.cpp: 3)."""
    if not snapshots(s.method):
        return 0.0
    state = s.seqs * s.gamma * recurrent_state_bytes(s.target) * eff.snapshot_moves
    return state / (gpu.bandwidth * eff.bandwidth)
