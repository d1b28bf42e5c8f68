"""One speculative round's time, term by term, and the breakdown a prediction reports.

    t_round = t_draft + t_catchup + t_verify + t_snapshot + t_checkpoint_target
              + t_checkpoint_draft + t_replay + t_drafted + t_spec_pass + t_round_fixed

The drafting terms are in :mod:`specbench.theory.methods`; the verify is the roofline (or a
measured pass curve, or the engine's verify curve where it costs more, :func:`floored`), plus
host sampling of the verified rows; the replay re-runs the accepted prefix after a host restore.
:mod:`specbench.theory.speedup` turns a round into rates and an interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from specbench.theory.arch import recurrent_state_bytes
from specbench.theory.cost import (
    Bound,
    Efficiency,
    ForwardCost,
    forward_cost,
    forward_time,
    head_share,
    roofline,
    sampling_time,
)
from specbench.theory.formulas import tokens_per_round
from specbench.theory.hardware import Gpu
from specbench.theory.measured.curves import Floor
from specbench.theory.methods import (
    DraftSetup,
    catchup_time,
    checkpoint_time,
    draft_cost,
    replay_tokens,
    snapshot_time,
    snapshots,
)

TargetPass = Callable[[int], float]  # tokens in one target pass -> seconds
PassBound = Bound | Literal["measured", "curve"]  # "curve": the engine's verify curve (curves.py)


@dataclass(frozen=True)
class Breakdown:
    """Where a round's time goes; bytes and FLOPs are per forward pass over all sequences."""

    target_step_s: float
    verify_s: float
    draft_s: float
    draft_step_s: float
    checkpoint_s: float  # host checkpoints, target + draft (the two fields below)
    replay_s: float
    overhead_s: float
    round_s: float
    tokens_per_round: float
    alpha: float
    acceptance: float
    experts_touched_step: float
    experts_touched_verify: float
    step_bytes: float
    verify_bytes: float
    draft_bytes: float
    step_flops: float
    verify_flops: float
    bound: PassBound
    verify_bound: PassBound
    checkpoint_bytes: int
    catchup_s: float = 0.0  # the drafter's pass over the verified batch (methods.py)
    snapshot_s: float = 0.0  # per-token state snapshots written by the verify (snapshot methods)
    checkpoint_target_s: float = 0.0
    checkpoint_draft_s: float = 0.0
    launch_s: float = 0.0  # fixed-latency share of draft_s + catchup_s (not added again)
    drafted_s: float = 0.0  # the engine's host work per drafted token verified (theory/measured/engines.py)
    draft_host_s: float = 0.0  # the engine's host work per drafting pass, part of draft_s (engines.py)
    verify_context_s: float = 0.0  # the verify's further tokens over the context, part of verify_s
    spec_pass_s: float = 0.0  # the engine's host work per target pass of a speculating server (engines.py)


def round_breakdown(
    s: DraftSetup,
    gpu: Gpu,
    eff: Efficiency,
    alpha: float,
    acc: float,
    target_pass: TargetPass | None,
    tau_given: float | None = None,
    context_slope_s: float = 0.0,
    floor: Floor | None = None,
) -> Breakdown:
    width = s.verify_width  # γ + 1 for a chain, the tree's draft tokens + 1
    step = forward_cost(s.target, s.target_bpw, s.seqs, 1, s.context, s.target_head_bpw)
    verify = forward_cost(s.target, s.target_bpw, s.seqs, width, s.context, s.target_head_bpw)
    drafting = draft_cost(s, gpu, eff)
    # the verify copies C·width logit rows and samples C·τ positions on the host, a step C
    tau = tau_given or tokens_per_round(alpha, s.gamma)
    samples = sampling_time(s.target, s.seqs * width, gpu, eff, sampled=s.seqs * tau)
    extra_samples = samples - sampling_time(s.target, s.seqs, gpu, eff)
    if target_pass is None:
        t_step = forward_time(step, gpu, eff) + sampling_time(s.target, s.seqs, gpu, eff)
        t_body, verify_bound = floored(verify, step, gpu, eff, floor)
        t_verify = t_body + samples
        bounds: tuple[PassBound, ...] = (roofline(step, gpu, eff)[1], verify_bound)
    else:  # the measured step holds its own sampling; the probe's prefills sample one position
        t_step, t_verify = target_pass(s.seqs), target_pass(s.seqs * width) + extra_samples
        # ... and compute one LM-head row where the verify computes γ+1 per sequence (cost.py)
        t_verify += (t_verify - extra_samples - t_step) * head_share(s.target, s.context)
        bounds = ("measured", "measured")
    t_context = (
        verify_context_time(s.seqs * (width - 1), s.context, context_slope_s, eff) if target_pass else 0.0
    )
    t_verify += t_context
    ckpt_target, ckpt_draft = checkpoint_time(drafting, s, alpha, gpu)
    t_snap = snapshot_time(s, gpu, eff)
    t_replay = replay_time(s, gpu, eff, alpha, target_pass, floor)
    tokens = tau + (replay_tokens(alpha, s.gamma)[0] if t_replay else 0.0)
    t_drafted = s.seqs * (width - 1) * eff.drafted_s  # the engine's host work per drafted token
    spent = (
        drafting.round_s
        + drafting.catchup_s
        + t_verify
        + t_snap
        + ckpt_target
        + ckpt_draft
        + t_replay
        + t_drafted
        + eff.spec_pass_s  # one target pass a round (theory/measured/engines.py)
    )
    return Breakdown(
        target_step_s=t_step,
        verify_s=t_verify,
        draft_s=drafting.round_s,
        draft_step_s=drafting.step_s,
        checkpoint_s=ckpt_target + ckpt_draft,
        replay_s=t_replay,
        overhead_s=eff.round_s,
        round_s=spent + eff.round_s,
        # a replay pass also emits a token (its own bonus), in the rounds that reject
        tokens_per_round=tokens,
        alpha=alpha,
        acceptance=acc,
        experts_touched_step=step.experts_touched,
        experts_touched_verify=verify.experts_touched,
        step_bytes=step.bytes,
        verify_bytes=verify.bytes,
        draft_bytes=drafting.step.bytes if drafting.step else 0.0,
        step_flops=step.flops,
        verify_flops=verify.flops,
        bound=bounds[0],
        verify_bound=bounds[1],
        checkpoint_bytes=drafting.state_bytes * s.seqs,
        catchup_s=drafting.catchup_s,
        snapshot_s=t_snap,
        checkpoint_target_s=ckpt_target,
        checkpoint_draft_s=ckpt_draft,
        launch_s=drafting.launch_s,
        drafted_s=t_drafted,
        spec_pass_s=eff.spec_pass_s,
        draft_host_s=drafting.host_s,
        verify_context_s=t_context,
    )


def floored(
    cost: ForwardCost, step: ForwardCost, gpu: Gpu, eff: Efficiency, floor: Floor | None
) -> tuple[float, PassBound]:
    """A pass's roofline time, or the engine's curve at its tokens times the step when that is
    more (theory/measured/curves.py), and which of them bound it."""
    t, bound = forward_time(cost, gpu, eff), roofline(cost, gpu, eff)[1]
    if floor is None:
        return t, bound
    by_curve = floor(cost.tokens) * forward_time(step, gpu, eff)
    return (by_curve, "curve") if by_curve > t else (t, bound)


def verify_context_time(further_tokens: float, context: int, slope_s: float, eff: Efficiency) -> float:
    """What a measured verify misses at the run's context: the forward probe's prefills attend to
    an empty cache, and the measured step pays its context once. Each of the pass's further tokens
    pays ``query_context_share`` of the step's cost per context position again (its own scores and
    weighted sums; the K/V read is shared), ``further · context · slope · share``."""
    return further_tokens * context * max(0.0, slope_s) * eff.query_context_share


def replay_time(
    s: DraftSetup,
    gpu: Gpu,
    eff: Efficiency,
    alpha: float,
    target_pass: TargetPass | None,
    floor: Floor | None = None,
) -> float:
    """P_reject · (t(target, C × m) + t(drafter, C × m)), m = E[a | a < γ] + 1, with replay on a
    hybrid target that a host checkpoint restores (methods.py); else 0."""
    if not s.replay or recurrent_state_bytes(s.target) == 0 or snapshots(s.method):
        return 0.0
    p_reject, tokens = replay_tokens(alpha, s.gamma)
    low = int(tokens)
    step = forward_cost(s.target, s.target_bpw, s.seqs, 1, s.context, s.target_head_bpw)
    times = [
        target_pass(s.seqs * t) + sampling_time(s.target, s.seqs * (t - 1), gpu, eff)
        if target_pass
        else floored(
            forward_cost(s.target, s.target_bpw, s.seqs, t, s.context, s.target_head_bpw),
            step,
            gpu,
            eff,
            floor,
        )[0]
        + sampling_time(s.target, s.seqs * t, gpu, eff)
        for t in (low, low + 1)
    ]
    w = tokens - low
    return p_reject * ((1 - w) * times[0] + w * times[1] + catchup_time(s, gpu, eff, tokens))
