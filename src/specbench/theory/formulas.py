"""Closed-form pieces of the theory: expert union, saturation, Leviathan speedup, acceptance.

Expert union. With E routed experts, top-k routing and t tokens routed independently and
uniformly, an expert is missed by one token with probability (1 − k/E), so the expected number
of distinct experts a layer reads is

    N(t) = E · (1 − (1 − k/E)^t)              N(1) = k,  N(∞) = E

Saturation. N(T) reaches a fraction c of E at

    T = ln(1 − c) / ln(1 − k/E)               (E=256, k=8, c=0.95: T ≈ 94 tokens)

Leviathan et al. With i.i.d. per-token acceptance α and a draft of γ tokens, the expected number
of tokens one verify step emits (accepted prefix + the bonus/correction token) is

    τ(α, γ) = (1 − α^(γ+1)) / (1 − α)        (τ = γ + 1 at α = 1)

    speedup = τ · t_target / (γ·t_draft + t_verify(γ+1) + t_overhead)
            = τ / (γ·c + v(γ) + o)            c = t_draft/t_target, v = t_verify/t_target

Acceptance. Servers report A = accepted / drafted. The accepted prefix a has P(a ≥ i) = α^i, so

    A(α, K) = (Σ_{i=1..K} α^i) / K            (monotone in α on [0, 1]; inverted with brentq)
"""

from __future__ import annotations

import math

from scipy.optimize import brentq

from specbench.errors import ConfigError


def experts_touched(experts: int, top_k: int, tokens: float) -> float:
    """N(t) = E·(1 − (1 − k/E)^t): expected distinct experts per layer for t routed tokens."""
    if experts <= 0:
        return 0.0
    return experts * (1.0 - float((1.0 - top_k / experts) ** tokens))


def saturation_tokens(experts: int, top_k: int, coverage: float = 0.95) -> float:
    """T = ln(1 − c)/ln(1 − k/E): tokens after which a layer reads a fraction c of its experts."""
    if not 0.0 < coverage < 1.0 or not 0 < top_k < experts:
        raise ConfigError("saturation needs 0 < coverage < 1 and 0 < top_k < experts")
    return math.log(1.0 - coverage) / math.log(1.0 - top_k / experts)


def tokens_per_round(alpha: float, gamma: int) -> float:
    """τ = (1 − α^(γ+1))/(1 − α): tokens emitted per verify step (bonus token included)."""
    _check_alpha(alpha)
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def tree_tokens_per_round(alpha: float, depth: int, top_k: int) -> float:
    """τ of a tree draft with ``top_k`` candidates per level and ``depth`` levels: a level is
    accepted when any of its k candidates is, q = 1 − (1 − α)^k (candidates treated as
    independent draws at per-token acceptance α), so τ = Σ_{i=0..depth} q^i. An upper bound
    when the engine verifies fewer nodes than the full k-ary tree (EAGLE-2/SGLang keep the
    best ``num_draft_tokens``); give the published accepted length instead where there is one."""
    _check_alpha(alpha)
    _check_k(depth)
    _check_k(top_k)
    q = 1.0 - (1.0 - alpha) ** top_k
    return sum(q**i for i in range(depth + 1))


def alpha_from_tokens_per_round(tau: float, gamma: int) -> float:
    """The chain α whose τ(α, γ) equals a published mean accepted length ``tau`` (bonus
    token included, as vLLM and SGLang print it); 1 ≤ tau ≤ γ + 1."""
    _check_k(gamma)
    if not 1.0 <= tau <= gamma + 1:
        raise ConfigError(f"accepted length must be within 1..K+1 = {gamma + 1}, got {tau}")
    if tau >= gamma + 1:
        return 1.0
    if tau <= 1.0:
        return 0.0
    return float(brentq(lambda a: tokens_per_round(a, gamma) - tau, 0.0, 1.0, xtol=1e-12))


def expected_accepted(alpha: float, k: int) -> float:
    """E[a] = Σ_{i=1..K} α^i: accepted draft tokens per verify step."""
    return sum(alpha**i for i in range(1, k + 1))


def acceptance_from_alpha(alpha: float, k: int) -> float:
    """A = (Σ_{i=1..K} α^i)/K: the server-style accepted/drafted ratio for per-token α."""
    _check_alpha(alpha)
    _check_k(k)
    return expected_accepted(alpha, k) / k


def alpha_from_acceptance(acceptance: float, k: int) -> float:
    """Invert A(α, K) for α ∈ [0, 1] (scipy brentq; A is strictly increasing in α)."""
    _check_k(k)
    if not 0.0 <= acceptance <= 1.0:
        raise ConfigError(f"acceptance must be within 0..1, got {acceptance}")
    if acceptance in (0.0, 1.0):
        return acceptance
    return float(brentq(lambda a: acceptance_from_alpha(a, k) - acceptance, 0.0, 1.0, xtol=1e-12))


def leviathan_speedup(alpha: float, gamma: int, cost_ratio: float, verify_ratio: float) -> float:
    """τ/(γ·c + v): the paper's speedup with draft-cost ratio c and verify-cost ratio v."""
    return tokens_per_round(alpha, gamma) / (gamma * cost_ratio + verify_ratio)


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be within 0..1, got {alpha}")


def _check_k(k: int) -> None:
    if k < 1:
        raise ConfigError(f"draft length must be at least 1, got {k}")
