"""What an engine was measured to do beyond the forward passes, as the value types the theory reads.

Every prediction starts from :class:`~specbench.theory.cost.Efficiency`'s defaults; an engine
adds the host work it is known to do per speculative round (:class:`HostCost`), the verify-cost
curves measured on it (:class:`~specbench.theory.measured.curves.VerifyCurve`), how its hybrid
models' recurrent state crosses memory, and whether its catch-up pass drafts. Each engine declares
these itself, each value fitted once (never per point) and named with its source (specbench.engines:
engines/measured/ and ``Origin.theory_terms``); whoever predicts for an engine hands its
:class:`EngineTerms` in, and every engine's together as :class:`Priors`. The theory never names an
engine: where nothing public or probed fixes a value, it is 0 (unknown), not guessed.

**Bands.** Each value carries the band the interval of a prediction uses (theory/spread/interval.py),
from the same evidence as the value. An engine with none of these for the device and method pays
``round_s`` with the band of :data:`UNKNOWN_ROUND` and ``draft_pass_s`` with that of
:data:`UNKNOWN_PASS`: from none up to the most any engine was measured to spend on that kind of
device.

Each entry names the one source it was fitted on (``fitted_on``), so a validation can drop the
entries fitted on the source it holds out (:meth:`Priors.without`; bench/theory_published.py,
leave-one-source-out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu
from specbench.theory.measured.bands import observed_band
from specbench.theory.measured.curves import VerifyBand, VerifyCurve, verify_band

CPU_DEVICE = "cpu"

Device = Literal["gpu", "cpu"]


@dataclass(frozen=True)
class HostCost:
    """One named engine cost: ``field`` of :class:`Efficiency` on a ``device`` (and only for
    ``method`` when given), its fitted value, its band and the one source it was fitted on."""

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


@dataclass(frozen=True)
class EngineTerms:
    """What the theory knows of one engine, as the engine declares it: ``kind`` (the name a run
    records), ``name`` (how reports write it), its named host costs, its measured verify curves,
    how many times a hybrid model's recurrent state crosses memory per pass and per extra verify
    snapshot (``state_moves``; None: updated in place, 2 and 1), whether its catch-up pass over
    the verified batch also drafts the first token (theory/methods.py: γ − 1 further drafting
    passes, γ otherwise), and whether it re-runs the accepted prefix after restoring a hybrid
    model's checkpoint (``replays_prefix``, theory/methods.py)."""

    kind: str
    name: str
    host_costs: tuple[HostCost, ...] = ()
    curves: tuple[VerifyCurve, ...] = ()
    state_moves: tuple[float, float] | None = None
    catchup_drafts: bool = False
    replays_prefix: bool = False

    def without(self, source: str) -> EngineTerms:
        """These terms less the host costs fitted on ``source`` (a held-out validation fold)."""
        return replace(self, host_costs=tuple(c for c in self.host_costs if c.fitted_on != source))


@dataclass(frozen=True)
class Priors:
    """What the theory knows about engines: every engine's terms, in the order their registry
    lists them. A validation passes them without the entries fitted on what it holds out."""

    engines: tuple[EngineTerms, ...] = ()

    def of(self, kind: str | None) -> EngineTerms | None:
        """``kind``'s terms (:meth:`named`); None: the engine is not known."""
        return None if kind is None else self.named(kind)

    def named(self, kind: str) -> EngineTerms:
        """``kind``'s terms; a kind no engine here declares is known by its name alone (nothing
        measured: the unknown engine's bands)."""
        return next((e for e in self.engines if e.kind == kind), EngineTerms(kind, kind))

    @property
    def curves(self) -> tuple[VerifyCurve, ...]:
        """Every engine's verify curves: the envelope of an engine with none of its own."""
        return tuple(c for e in self.engines for c in e.curves)

    @property
    def host_costs(self) -> tuple[HostCost, ...]:
        return tuple(c for e in self.engines for c in e.host_costs)

    def without(self, source: str) -> Priors:
        """Every engine's terms less the host costs fitted on ``source``."""
        return Priors(tuple(e.without(source) for e in self.engines))

    def keeping(self, curve: Callable[[VerifyCurve], bool]) -> Priors:
        """Every engine's terms with only the verify curves ``curve`` accepts."""
        return Priors(tuple(replace(e, curves=tuple(filter(curve, e.curves))) for e in self.engines))


# No named cost for the engine, device and method: the host work per round is not known. The
# band runs from none to the most measured per round on that kind of device: 0.90 ms, the lab
# MoE pair's draft8 arm on the first H200 run (llama-server), and 3.7 ms, llama-server's round
# on the 2-core VM's MoE pair before drafted_s (--fit-arm draft4; docs/theory.md).
UNKNOWN_ROUND = {
    "gpu": HostCost("gpu", "round_s", 1.0e-4, 0.0, 0.90e-3,
                    "host work per round of an engine with no measured host cost (GPU)", "none"),
    "cpu": HostCost("cpu", "round_s", 1.0e-4, 0.0, 3.7e-3,
                    "host work per round of an engine with no measured host cost (CPU)", "none"),
}  # fmt: skip

# ... and its host work per drafting pass, for the same engines. Every proposer is a host loop
# over its drafting passes (vLLM's ``EagleProposer.propose`` runs ``num_speculative_tokens − 1``
# Python iterations, each preparing positions, slot mappings and attention metadata before it
# launches the head; llama.cpp's ``common_speculative`` draft loop samples on the host after each
# pass), and both host costs measured so far are per pass, not per round (llama.cpp's
# ``spec_pass_s``, vLLM's EAGLE-3 ``draft_pass_s``). The band runs from none to the most measured
# per pass on that kind of device: 0.90 ms a pass on a GPU (the same H200 arm as above; with
# ``draft_pass_s`` of vllm#20780 left out, nothing measured is higher), 0.74 ms a drafted token on
# a CPU (the top of llama.cpp's ``drafted_s`` band). Central value 0: unknown, not guessed.
UNKNOWN_PASS = {
    "gpu": HostCost("gpu", "draft_pass_s", 0.0, 0.0, 0.90e-3,
                    "host work per drafting pass of an engine with no measured host cost (GPU)", "none"),
    "cpu": HostCost("cpu", "draft_pass_s", 0.0, 0.0, 0.74e-3,
                    "host work per drafting pass of an engine with no measured host cost (CPU)", "none"),
}  # fmt: skip


def state_traffic(engine: EngineTerms | None, eff: Efficiency) -> Efficiency:
    """``eff`` with ``engine``'s recurrent-state traffic (:attr:`EngineTerms.state_moves`);
    unchanged for an engine that updates the state in place or is not known."""
    moves = engine.state_moves if engine is not None else None
    return replace(eff, state_moves=moves[0], snapshot_moves=moves[1]) if moves else eff


def catchup_drafts(engine: EngineTerms | None) -> bool:
    """Whether ``engine``'s catch-up pass also drafts the first token (None: not known, no)."""
    return engine is not None and engine.catchup_drafts


def device_kind(gpu: Gpu) -> Device:
    """ "cpu" for the measured ``cpu`` device (the runner's probe), "gpu" for every preset."""
    return "cpu" if gpu.name == CPU_DEVICE else "gpu"


def host_costs(engine: EngineTerms | None, gpu: Gpu, method: str | None) -> list[HostCost]:
    """The named costs ``engine`` pays on ``gpu`` for ``method`` (None: those every method pays)."""
    kind = device_kind(gpu)
    costs: Sequence[HostCost] = engine.host_costs if engine is not None else ()
    return [c for c in costs if c.device == kind and (c.method is None or c.method == method)]


def engine_efficiency(
    engine: EngineTerms | None, gpu: Gpu, base: Efficiency | None = None, method: str | None = None
) -> Efficiency:
    """``base`` (default efficiencies) with the named host costs of ``engine`` on ``gpu`` for
    ``method`` (a drafting method of theory/methods.py; None: the costs every method pays) and
    the engine's recurrent-state traffic."""
    eff = state_traffic(engine, base or Efficiency())
    for c in host_costs(engine, gpu, None):
        eff = replace(eff, **{c.field: c.value})
    return method_efficiency(engine, gpu, eff, method) if method else eff


def method_efficiency(engine: EngineTerms | None, gpu: Gpu, eff: Efficiency, method: str) -> Efficiency:
    """``eff`` with the host costs ``engine`` pays only for ``method`` (the others untouched,
    so a fitted round overhead survives)."""
    for c in host_costs(engine, gpu, method):
        if c.method is not None:
            eff = replace(eff, **{c.field: c.value})
    return eff


def engine_band(
    engine: EngineTerms | None, gpu: Gpu, bytes_per_weight: float, moe: bool, priors: Priors
) -> VerifyBand:
    """The verify band of ``engine`` (None: unknown) on ``gpu``: its own curves, else the envelope
    of every engine's in ``priors`` (theory/measured/curves.py)."""
    name, own = (engine.name, engine.curves) if engine is not None else (None, ())
    return verify_band(name, own, gpu, bytes_per_weight, moe, priors.curves)
