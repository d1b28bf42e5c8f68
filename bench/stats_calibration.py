"""Calibrate specbench's verdicts on synthetic experiments (prints figures; asserts nothing).

Each experiment is a baseline and an arm measured on P prompts in up to K interleaved launch
pairs. log(arm / baseline) for prompt i in launch pair r is

    d_ri = log(effect) + p_i + (u_arm,r − u_base,r) + (e_arm,ri − e_base,ri)

with launch factors u (normal, sd --launch-sd; with probability --disturbed a launch is also
slowed ×0.7, the heavy tail of a shared machine), request noise e (sd --request-sd) and, with
--bimodal, a prompt effect p_i of ±10 % (drafting that pays on half the prompts only).

Two designs decide each experiment: the fixed protocol (K launches, 95 % interval) and the
adaptive rule of specbench.run.adaptive (looks after launch 3 … K at nominal 1 − α′, stop when
faster / slower / equivalent). Both use the launch-level mixed model of specbench.analysis.launches,
vectorised here for balanced data; the script first checks that it matches the library's fit.

    .venv/bin/python bench/stats_calibration.py --experiments 2000
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from specbench.analysis import launches as L
from specbench.analysis.sequential import nominal_alpha

Array = npt.NDArray[np.float64]
BAND = math.log1p(0.01), math.log(1 - 0.01)


def simulate(
    rng: np.random.Generator, m: int, k: int, p: int, effect: float, args: argparse.Namespace
) -> Array:
    """Paired log-ratios, shape (experiments, launches, prompts)."""

    def launch() -> Array:
        u = rng.normal(0, args.launch_sd, (m, k, 1))
        return u + np.where(rng.random((m, k, 1)) < args.disturbed, math.log(0.7), 0.0)

    split = np.where(np.arange(p) % 2 == 0, 0.1, -0.1)
    prompt = (split - split.mean())[None, None, :] if args.bimodal else 0.0  # mean 0: effect stays exact
    noise = rng.normal(0, args.request_sd, (m, k, p)) - rng.normal(0, args.request_sd, (m, k, p))
    return math.log(effect) + prompt + launch() - launch() + noise


def fit(d: Array, confidence: Array | float) -> tuple[Array, Array, Array]:
    """(μ̂, lo, hi) of the mixed model for each experiment, on its first d.shape[1] launches."""
    _, r, p = d.shape
    means = d.mean(axis=2)
    s2_m = means.var(axis=1, ddof=1)
    resid = d - means[:, :, None] - d.mean(axis=1, keepdims=True) + d.mean(axis=(1, 2), keepdims=True)
    dof_e = (r - 1) * (p - 1)
    rss = (resid**2).sum(axis=(1, 2))
    pooled = s2_m <= rss / dof_e / p
    s2 = np.where(pooled, ((r - 1) * s2_m * p + rss) / (r - 1 + dof_e), s2_m * p)
    dof = np.where(pooled, r - 1 + dof_e, r - 1)
    n_even, n_odd = (r + 1) // 2, r // 2  # launch pairs started by each arm (ABBA by parity)
    c = (1 / n_even + 1 / n_odd) / 4 if n_odd else 1 / r
    half = sps.t.ppf(0.5 + np.asarray(confidence) / 2, dof) * np.sqrt(s2 / p * c)
    mu = (means[:, 0::2].mean(axis=1) + means[:, 1::2].mean(axis=1)) / 2 if n_odd else means.mean(axis=1)
    return mu, mu - half, mu + half


def verdicts(lo: Array, hi: Array) -> Array:
    """0 undetermined, 1 faster, −1 slower, 2 equivalent (the ±1 % band)."""
    out = np.zeros(lo.shape, dtype=int)
    out[lo > BAND[0]] = 1
    out[hi < BAND[1]] = -1
    out[(lo >= BAND[1]) & (hi <= BAND[0])] = 2
    return out


def adaptive(d: Array, alpha: float) -> tuple[Array, Array]:
    """(verdict, launches used) under the sequential rule with looks after launch 3 … K."""
    m, k, _ = d.shape
    conf = 1 - nominal_alpha(k, alpha)
    verdict, used = np.zeros(m, dtype=int), np.full(m, k)
    open_ = np.ones(m, dtype=bool)
    for n in range(L.MIN_LAUNCHES, k + 1):
        _, lo, hi = fit(d[:, :n, :], conf)
        v = verdicts(lo, hi)
        stop = open_ & (v != 0)
        verdict[stop], used[stop] = v[stop], n
        open_ &= ~stop
    return verdict, used


def check_against_library(rng: np.random.Generator, args: argparse.Namespace) -> float:
    """Largest |difference| of the bounds between this vectorised fit and specbench.analysis.launches.fit."""
    d = simulate(rng, 20, 5, 5, 1.1, args)
    _, lo, hi = fit(d, 0.95)
    worst = 0.0
    for i in range(d.shape[0]):
        r, p = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
        pairs = pd.DataFrame({"launch": r.ravel(), "prompt": p.ravel().astype(str), "d": d[i].ravel()})
        f = L.fit(pairs)
        worst = max(worst, abs(f.lo - lo[i]), abs(f.hi - hi[i]))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiments", type=int, default=2000)
    ap.add_argument("--max-launches", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--launch-sd", type=float, default=0.03)
    ap.add_argument("--request-sd", type=float, default=0.04)
    ap.add_argument("--disturbed", type=float, default=0.05)
    ap.add_argument("--bimodal", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.05, help="the matrix's alpha (all looks)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        "vectorised fit vs specbench.analysis.launches.fit: "
        f"max |Δ bound| = {check_against_library(rng, args):.2e}"
    )
    k, m = args.max_launches, args.experiments
    print(
        f"{m} experiments per effect, {args.prompts} prompts, launch sd {args.launch_sd}, request sd "
        f"{args.request_sd}, disturbed launches {args.disturbed:.0%}, bimodal prompts {args.bimodal}; "
        f"adaptive α {args.alpha}: α′ = {nominal_alpha(k, args.alpha):.5f} over looks 3…{k}"
    )
    header = "effect  design        faster  slower  equiv  undet  launches (mean)"
    print(header)
    for effect in (1.0, 1.05, 1.20, 0.6):
        d = simulate(rng, m, k, args.prompts, effect, args)
        _, lo, hi = fit(d, 0.95)
        fixed = verdicts(lo, hi)
        adapt, used = adaptive(d, args.alpha)
        for name, v, n in (("fixed 10", fixed, np.full(m, k)), ("adaptive", adapt, used)):
            share = [float(np.mean(v == x)) for x in (1, -1, 2, 0)]
            cols = "  ".join(f"{s:6.1%}" for s in share)
            print(f"×{effect:<5.2f} {name:<12} {cols}  {n.mean():5.2f}")
        same = float(np.mean(fixed == adapt))
        print(
            f"        same verdict in both designs: {same:.1%}; "
            f"launches adaptive / fixed: {used.mean() / k:.2f}"
        )


if __name__ == "__main__":
    main()
