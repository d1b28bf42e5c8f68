"""Predict decode speed with and without speculation, and fit efficiency to a measurement.

Baseline: one step decodes one token for each of C sequences::

    baseline tok/s = C / t(target, C × 1)

Speculation: a round drafts γ tokens per sequence, verifies γ+1 per sequence in one pass
(routed experts are the union over all C·(γ+1) tokens), saves/restores recurrent state on
hybrids, and emits τ(α, γ) tokens per sequence::

    t_round  = t_draft + t_catchup + t(target, C × (γ+1)) + t_snapshot
               + t_checkpoint_target + t_checkpoint_draft + t_replay + t_drafted + t_round_fixed

(each term in :mod:`specbench.theory.methods`; t_replay only with ``replay=True`` on a hybrid
target restored from a host checkpoint; the replay pass emits one more token, so a round then
yields τ + (1 − α^γ) tokens).
    spec tok/s = C · τ / t_round              speedup = spec / baseline

Without a run, the verify pass is ``max(roofline, v(T) · step)`` with v(T) the engine's measured
curve where one is known (theory/measured/curves.py), and every prediction carries an interval from the
terms it does not know for its setup (theory/spread/terms.py, propagated by theory/spread/interval.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from specbench.errors import ConfigError
from specbench.theory.calibrate import fit_bandwidth
from specbench.theory.cost import (
    Efficiency,
    forward_cost,
    forward_time,
)
from specbench.theory.formulas import (
    acceptance_from_alpha,
    alpha_from_acceptance,
    alpha_from_tokens_per_round,
    tree_tokens_per_round,
)
from specbench.theory.hardware import Gpu
from specbench.theory.inputs import Weights, check_inputs
from specbench.theory.measured.curves import Floor
from specbench.theory.measured.engines import Priors, catchup_drafts, engine_band, engine_efficiency
from specbench.theory.methods import (
    DraftSetup,
    check_method,
)
from specbench.theory.parallel import tensor_parallel_device
from specbench.theory.presets import get_gpu, get_model, get_quant
from specbench.theory.round import Breakdown, PassBound, TargetPass, round_breakdown, verify_context_time
from specbench.theory.spread.interval import ENDS, End, Interval, Swing, propagate
from specbench.theory.spread.terms import Unknowns, blind_unknowns

# Fitting η_bw to a measured baseline is in theory/calibrate.py, the text of a Prediction in
# theory/predicttext.py, a round's terms and its Breakdown in theory/round.py (re-exported here).
__all__ = ["Breakdown", "PassBound", "Prediction", "Spread", "TargetPass", "Tree", "predict",
           "predict_architecture", "roofline_steps", "spread_of", "verify_context_time"]  # fmt: skip


@dataclass(frozen=True)
class Spread:
    """A prediction's intervals from the terms it does not know (theory/spread/interval.py): the
    speedup's and the baseline rate's, each with every term's swing."""

    speedup: Interval
    baseline_tok_s: Interval

    @property
    def dominant(self) -> str | None:
        """The term that dominates the speedup's width, with its band, or None."""
        return self.speedup.dominant_text()


@dataclass(frozen=True)
class Prediction:
    """Predicted decode rates (tokens/s summed over all sequences) and the breakdown;
    ``interval`` (from :func:`predict`) says how far the unknown terms move them."""

    model: str
    gpu: str
    quant: str
    method: str
    draft_model: str | None
    draft_max: int
    concurrency: int
    context: int
    baseline_tok_s: float
    spec_tok_s: float
    speedup: float
    breakdown: Breakdown
    efficiency: Efficiency
    interval: Spread | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resolve_alpha(
    acceptance: float | None, alpha: float | None, k: int, accepted_length: float | None = None
) -> tuple[float, float]:
    """(α, A) from exactly one of them; A = Σα^i/K. A published mean accepted length (bonus
    token included) gives the chain α with that τ."""
    if sum(x is not None for x in (acceptance, alpha, accepted_length)) != 1:
        raise ConfigError(
            "give exactly one of acceptance (accepted/drafted), alpha (per token) or accepted_length"
        )
    if accepted_length is not None:
        a = alpha_from_tokens_per_round(accepted_length, k)
        return a, acceptance_from_alpha(a, k)
    if alpha is not None:
        return alpha, acceptance_from_alpha(alpha, k)
    assert acceptance is not None
    return alpha_from_acceptance(acceptance, k), acceptance


def predict(
    model: str,
    gpu: str | Gpu,
    quant: str,
    method: str,
    draft_max: int,
    *,
    acceptance: float | None = None,
    alpha: float | None = None,
    draft_model: str | None = None,
    draft_quant: str | None = None,
    concurrency: int = 1,
    context: int = 4096,
    efficiency: Efficiency | None = None,
    replay: bool = False,
    draft_host_sampling: bool = False,
    baseline_tok_s: float | None = None,
    tensor_parallel: int = 1,
    accepted_length: float | None = None,
    tree: Tree | None = None,
    engine: str | None = None,
    alpha_range: tuple[float, float] | None = None,
    spread: bool = True,
    terms_at: tuple[str, End] | None = None,
    priors: Priors | None = None,
) -> Prediction:
    """Predict baseline and speculative decode rates (see the module docstring).

    ``acceptance`` is the server ratio accepted/drafted, ``alpha`` the per-token probability;
    give one. ``draft_model`` (a preset or config.json path) is required for method ``draft``
    and refused otherwise; ``draft_quant`` defaults to ``quant``. ``gpu`` may also be a hardware
    YAML file. ``baseline_tok_s`` (a published or measured baseline, tokens/s summed over the C
    sequences) fits η_bw to it first, as ``--calibrate`` does on a run. ``tensor_parallel``
    splits each pass over that many devices (theory/parallel.py). ``accepted_length`` is a
    published mean tokens per round (bonus included) in place of an acceptance; ``tree`` makes
    the draft a tree of ``draft_max`` levels (:class:`Tree`).

    ``engine`` (a kind ``priors`` knows; None: not known) adds that engine's named host costs,
    recurrent-state traffic and catch-up (theory/measured/engines.py) and its measured verify curve
    (theory/measured/curves.py). ``priors`` are every engine's terms as the engines declare them
    (:func:`specbench.engines.theory_priors`, or those less what a validation holds out): an
    unknown engine's verify band reaches up to their curves; without them nothing measured is
    known (the roofline alone), and ``engine`` needs them. The prediction's
    ``interval`` comes from the terms not known for this setup (theory/spread/terms.py);
    ``alpha_range`` makes the acceptance one of them (an estimated α); an ``alpha`` without it is
    a design whose realisation varies (``terms.DESIGNED_MISS``), ``alpha_range=(α, α)`` an exact
    one; ``acceptance`` and ``accepted_length`` are measured. ``spread=False`` skips
    the interval; ``terms_at=(key, end)`` evaluates the model with one term at one end of its
    band instead (for callers that propagate a composite prediction, theory/stopping.py).
    """
    m = check_method(method)
    check_inputs(draft_max, concurrency, context)
    if (draft_model is not None) != (m == "draft"):
        raise ConfigError("draft_model is required for method 'draft' and only for it")
    _resolve_alpha(acceptance, alpha, draft_max, accepted_length)  # input errors before any lookup
    q = get_quant(quant)
    dq = get_quant(draft_quant) if draft_quant is not None else q
    target = Weights(get_model(model), q.bytes_per_weight, q.name, q.head_bytes_per_weight)
    device = tensor_parallel_device(
        gpu if isinstance(gpu, Gpu) else get_gpu(gpu), tensor_parallel, target.arch
    )
    if engine is not None and priors is None:
        raise ConfigError(f"predict: engine {engine!r} needs priors=, the engines' terms (specbench.engines)")
    priors = priors or Priors()
    terms = priors.of(engine)
    base = efficiency or Efficiency()
    if terms is not None:
        base = engine_efficiency(terms, device, base, m)
    band = engine_band(terms, device, target.bytes_per_weight, target.arch.is_moe, priors)
    given = (acceptance, alpha, accepted_length)
    fixed: dict[str, Any] = {
        "draft": (
            Weights(get_model(draft_model), dq.bytes_per_weight, dq.name, dq.head_bytes_per_weight)
            if draft_model
            else None
        ),
        "concurrency": concurrency,
        "context": context,
        "replay": replay,
        "draft_host_sampling": draft_host_sampling,
        "tree": tree,
        "catchup_drafts": catchup_drafts(terms),
    }

    def run(eff: Efficiency, floor: Floor | None, accept: tuple[float | None, ...]) -> Prediction:
        if baseline_tok_s is not None:
            eff = fit_bandwidth(
                baseline_tok_s, target, device, context, concurrency=concurrency, efficiency=eff
            )
        acc, a, length = accept
        return predict_architecture(
            target, device, m, draft_max, acceptance=acc, alpha=a, accepted_length=length,
            efficiency=eff, verify_floor=floor, **fixed,
        )  # fmt: skip

    central = run(base, band.floor(None), given)
    width = (tree.tokens if tree else draft_max) + 1
    unknowns = blind_unknowns(
        terms,
        device,
        m,
        base,
        band=band,
        verify_tokens=concurrency * width,
        roof_steps=roofline_steps(target, device, central.efficiency, concurrency, width, context),
        baseline_known=baseline_tok_s is not None,
        alpha=central.breakdown.alpha,
        alpha_range=alpha_range,
        designed=alpha is not None,
    )

    def at(key: str, end: End) -> Prediction:
        a = unknowns.alpha(None, key, end)
        accept = given if a is None else (None, a, None)
        return run(unknowns.efficiency(base, key, end), unknowns.floor(key, end), accept)

    if terms_at is not None:
        return at(*terms_at)
    return replace(central, interval=spread_of(central, unknowns, at)) if spread else central


def spread_of(central: Prediction, unknowns: Unknowns, at: Callable[[str, End], Prediction]) -> Spread:
    """The speedup's and the baseline's intervals: ``at(key, end)`` for every term and end
    (an end the model cannot evaluate, such as a baseline no efficiency explains, moves nothing)."""
    results: dict[tuple[str, End], Prediction | None] = {}
    for term in unknowns.terms:
        for end in ENDS:
            try:
                results[term.key, end] = at(term.key, end)
            except ConfigError:
                results[term.key, end] = None

    def swings(field: str) -> list[Swing]:
        def value(key: str, end: End) -> float:
            p = results[key, end]
            return float(getattr(p, field)) if p is not None else math.nan

        return [Swing(t, value(t.key, "low"), value(t.key, "high")) for t in unknowns.terms]

    return Spread(
        propagate(central.speedup, swings("speedup")),
        propagate(central.baseline_tok_s, swings("baseline_tok_s")),
    )


def roofline_steps(target: Weights, gpu: Gpu, eff: Efficiency, seqs: int, width: int, context: int) -> float:
    """The roofline's verify over ``width`` tokens per sequence, in its own decode steps."""
    g = gpu.for_weights(target.quant)
    head = target.head_bytes_per_weight
    step = forward_time(forward_cost(target.arch, target.bytes_per_weight, seqs, 1, context, head), g, eff)
    verify = forward_cost(target.arch, target.bytes_per_weight, seqs, width, context, head)
    return forward_time(verify, g, eff) / step


@dataclass(frozen=True)
class Tree:
    """A tree draft: ``top_k`` candidates expanded per drafting pass, ``tokens`` draft tokens
    verified in one pass (SGLang ``--speculative-eagle-topk`` / ``--speculative-num-draft-tokens``;
    vLLM's tree ``speculative_token_tree``). Depth is the predict's ``draft_max`` (SGLang's
    ``--speculative-num-steps``)."""

    top_k: int
    tokens: int

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.tokens < 1:
            raise ConfigError("a tree needs top_k >= 1 and tokens >= 1")


def predict_architecture(
    target: Weights,
    gpu: Gpu,
    method: str,
    draft_max: int,
    *,
    acceptance: float | None = None,
    alpha: float | None = None,
    draft: Weights | None = None,
    concurrency: int = 1,
    context: int = 4096,
    efficiency: Efficiency | None = None,
    target_pass: TargetPass | None = None,
    replay: bool = False,
    draft_host_sampling: bool = False,
    accepted_length: float | None = None,
    tree: Tree | None = None,
    step_context_slope_s: float = 0.0,
    verify_floor: Floor | None = None,
    catchup_drafts: bool = False,
) -> Prediction:
    """:func:`predict` on already resolved architectures and device (no preset lookups).

    ``target_pass(T)``, when given, is the measured time of one target pass over T tokens (see
    :mod:`specbench.run.forwardprobe`); it replaces the roofline for the baseline step and the
    verify pass. The probe's passes run at an empty context; ``step_context_slope_s`` (seconds per
    context position of one measured decode step, from the baseline's requests) lets the verify's
    further tokens pay their share of it (:func:`verify_context_time`). Without ``target_pass``,
    ``verify_floor(T)`` (decode steps; theory/measured/curves.py) puts the engine's measured verify cost
    under the roofline's: the verify takes the larger of the two. ``catchup_drafts``: the
    engine's catch-up pass drafts the first token (theory/methods.py, theory/measured/engines.py).
    """
    m = check_method(method)
    check_inputs(draft_max, concurrency, context)
    if (draft is not None) != (m == "draft"):
        raise ConfigError("a draft model is required for method 'draft' and only for it")
    a, acc = _resolve_alpha(acceptance, alpha, draft_max, accepted_length)
    if tree is not None and m not in ("eagle", "eagle3", "mtp", "draft"):
        raise ConfigError(f"method {m!r} drafts a chain, not a tree")
    setup = DraftSetup(
        m,
        target.arch,
        target.bytes_per_weight,
        draft.arch if draft else None,
        draft.bytes_per_weight if draft else target.bytes_per_weight,
        draft_max,
        concurrency,
        context,
        replay,
        draft_host_sampling,
        tree.top_k if tree else 1,
        tree.tokens if tree else 0,
        catchup_drafts,
        target.head_bytes_per_weight,
        draft.head_bytes_per_weight if draft else target.head_bytes_per_weight,
    )
    tau = accepted_length or (tree_tokens_per_round(a, draft_max, tree.top_k) if tree else None)
    eff = efficiency or Efficiency()
    gpu = gpu.for_weights(target.quant)
    bd = round_breakdown(setup, gpu, eff, a, acc, target_pass, tau, step_context_slope_s, verify_floor)
    base = concurrency / bd.target_step_s
    spec = concurrency * bd.tokens_per_round / bd.round_s
    return Prediction(
        model=target.arch.name,
        gpu=gpu.name,
        quant=target.quant,
        method=m,
        draft_model=draft.arch.name if draft else None,
        draft_max=draft_max,
        concurrency=concurrency,
        context=context,
        baseline_tok_s=base,
        spec_tok_s=spec,
        speedup=spec / base,
        breakdown=bd,
        efficiency=eff,
    )
