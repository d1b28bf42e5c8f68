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
