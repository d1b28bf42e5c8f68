"""The terms a calibrated run still does not know, and each at the ends of its band.

On a run the baseline fixes η_bw, the acceptance is measured and the forward probe (llama.cpp)
measures the verify, so three terms of a blind prediction (theory/spread/terms.py) are gone or nearly:

- **verify cost**: the probe's curve with the 80 % range of its medians (setup.probe_band);
  without a probe the engine's measured curves, as blind; wider than the probe measured (C·(K+1)
  tokens at C in flight), from the probe's largest pass held to it extrapolated in proportion to
  its tokens (passcurve.py), each at least the roofline;
- **engine host work**: as blind, theory/measured/engines.py's band for the engine, device and method;
- **launch latency**: as blind, with the baseline refitted at each end (an end the baseline rules
  out moves nothing);
- **bandwidth, acceptance**: none, the baseline and the counters measured them.

Each end of each term is a :class:`Scenario`: the setup and the calibrated efficiency with that
term moved (calibration, and the ``--fit-arm`` fit, rerun on it), shared by every arm.
theory/spread/interval.py propagates the swings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench.analysis.predicted.models import ArmMethod
from specbench.analysis.predicted.setup import RunSetup, calibrate_setup
from specbench.errors import ConfigError
from specbench.theory.cost import Efficiency
from specbench.theory.passcurve import PassCurve
from specbench.theory.speedup import roofline_steps
from specbench.theory.spread.interval import End, Term
from specbench.theory.spread.terms import Unknowns, host_terms, launch_term, verify_term


@dataclass(frozen=True)
class Scenario:
    """The setup and the calibrated efficiency with one term at one end of its band."""

    setup: RunSetup
    efficiency: Efficiency


def run_unknowns(setup: RunSetup, spec: ArmMethod, eff: Efficiency) -> Unknowns:
    """The terms ``spec``'s arm does not know on this run (module docstring), the verify's at
    C·(K + 1) tokens."""
    tokens = setup.concurrency * (spec.draft_max + 1)
    terms: list[Term | None] = [_verify(setup, tokens, eff)]
    terms += host_terms(setup.engine, setup.gpu, spec.method, eff)
    terms.append(launch_term())
    return Unknowns(tuple(t for t in terms if t is not None), setup.verify)


def _verify(setup: RunSetup, tokens: int, eff: Efficiency) -> Term | None:
    if setup.beyond is not None:
        return _beyond(setup, setup.beyond, tokens, eff)
    if setup.curve is not None and setup.curve_band is not None:
        low, high = (c.ratio(tokens) for c in setup.curve_band)
        if high - low < 1e-9:
            return None
        return Term(
            "verify",
            f"the verify cost the forward probe measured at {tokens} tokens",
            low,
            setup.curve.ratio(tokens),
            high,
            "decode steps",
            "the baseline's forward probe: the 80 % range of its median prefill times",
        )
    if setup.verify is None:
        return None
    return verify_term(setup.verify, tokens, _roof_steps(setup, tokens, eff))


def _beyond(setup: RunSetup, probe: PassCurve, tokens: int, eff: Efficiency) -> Term | None:
    """The verify past the probe's largest pass m: the roofline, no less than the pass at m (the
    central value and the low end), up to the pass at m extrapolated in proportion to T."""
    roof = _roof_steps(setup, tokens, eff)
    low, high = max(roof, probe.held_ratio(tokens)), max(roof, probe.ratio(tokens))
    if high - low < 1e-9:
        return None
    return Term(
        "verify",
        f"the verify cost at {tokens} tokens, beyond the forward probe's {probe.largest}",
        low,
        low,
        high,
        "decode steps",
        f"the roofline, at least the probe's {probe.largest}-token pass;"
        " at most that pass in proportion to its tokens",
    )


def _roof_steps(setup: RunSetup, tokens: int, eff: Efficiency) -> float:
    """The roofline's verify of ``tokens`` over the setup's C sequences, in its decode steps."""
    c = setup.concurrency
    return roofline_steps(setup.models.target, setup.gpu, eff, c, tokens // c, setup.context)


Refit = Callable[[RunSetup, Efficiency], Efficiency]  # e.g. the round overhead fitted to an arm


def scenario(
    setup: RunSetup, unknowns: Unknowns, key: str, end: End, refit: Refit | None = None
) -> Scenario | None:
    """``setup`` with ``key`` at ``end``, calibrated again (and ``refit``, the ``--fit-arm``
    fit, again); None when the baseline rules that end out."""
    moved, base = setup, setup.base_efficiency
    if key == "verify":
        if setup.curve_band is not None:
            moved = replace(setup, curve=setup.curve_band[0 if end == "low" else 1])
        else:
            moved = replace(setup, verify_end=end)
    else:
        base = unknowns.efficiency(base, key, end)
        value = unknowns.term(key).at(end)
        costs = tuple(replace(c, value=value) if c.field == key else c for c in setup.engine.host_costs)
        moved = replace(setup, engine=replace(setup.engine, host_costs=costs))
    try:
        eff = calibrate_setup(moved, base)
        return Scenario(moved, refit(moved, eff) if refit else eff)
    except ConfigError:
        return None
