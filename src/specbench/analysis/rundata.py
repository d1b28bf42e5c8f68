"""A run directory loaded once, per-arm summary and speedups vs the baseline arm."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import (
    launchorder,
    metrics,
    multiplicity,
    points,
    sequential,
    stats,
)
from specbench.analysis.evidence import acceptance, noise
from specbench.analysis.launches import POSITION
from specbench.analysis.packed import pack
from specbench.analysis.rowbatch import RowBatch
from specbench.engines import DEFAULT_ENGINE, argstore, engine_for, read_record
from specbench.engines.base import Engine
from specbench.store.record import Record
from specbench.store.rundir import RunStore


@dataclass(frozen=True)
class RunData:
    """Everything analysis needs, loaded once from the run directory."""

    manifest: dict[str, Any]
    records: list[Record]
    cells: list[dict[str, Any]]
    df: pd.DataFrame
    # env.json: the models' SHA-256 (SELF_DRAFT by content), the machine. Empty where not stored.
    env: dict[str, Any] = field(default_factory=dict)
    # engine_args.json: the argument table the run's flags were checked against (CONFOUND reads
    # flags with it); None where the run stored none (made before tables were kept).
    engine_args: argstore.StoredArgs | None = None
    # Speedups already fitted, by (function, metric): the summary, the findings, the decision
    # table, the frames and the theory all ask for the same ones. Not an init field, so a
    # ``replace``d run (one workload's) starts empty.
    _fits: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Each request's operating point (issue 40), whoever built the frame: every per-point
        # table and comparison groups by it.
        if points.POINT not in self.df and "workload" in self.df and "prompt_id" in self.df:
            object.__setattr__(
                self, "df", points.with_points(self.df, _workload_order(self.manifest, self.df))
            )

    @property
    def baseline(self) -> str:
        return str(self.manifest.get("matrix", {}).get("baseline", "baseline"))

    @property
    def arms(self) -> list[str]:
        return list(self.manifest.get("matrix", {}).get("arms", {})) or sorted(self.df["arm"].unique())

    def arm_args(self, arm: str) -> list[str]:
        matrix = self.manifest.get("matrix", {})
        return [*matrix.get("common_args", []), *matrix.get("arms", {}).get(arm, [])]

    @property
    def engine(self) -> Engine:
        """The run's engine, for reading its flags and logs (nothing is launched)."""
        return engine_for(str(self.manifest.get("matrix", {}).get("engine", DEFAULT_ENGINE)))

    def speculates(self, arm: str) -> bool:
        """The arm is configured to speculate, by the run's engine's flag rules."""
        return self.engine.speculates(self.arm_args(arm))

    @property
    def confidence(self) -> float:
        """1 − the matrix's ``alpha`` (0.95 by default), or the sequential rule's nominal level
        when launches were added adaptively."""
        return sequential.confidence(self.manifest)

    @property
    def measured_arms(self) -> list[str]:
        present = set(self.df["arm"].unique())
        return [a for a in self.arms if a in present]

    @property
    def points(self) -> list[points.Point]:
        """The run's operating points in order (:mod:`specbench.analysis.points`)."""
        key = ("points", "")
        if key not in self._fits:
            self._fits[key] = points.points_of(self.df, _workload_order(self.manifest, self.df))
        return list(self._fits[key])

    @property
    def sweeps(self) -> bool:
        """Whether any workload of the run is a sweep of two or more operating points."""
        return len(self.points) > len({p.workload for p in self.points})


def load_run(root: Path) -> RunData:
    store = RunStore(root)
    manifest, cells = store.manifest(), store.cells()
    # One pass over the records (issue 31): each line is read once as a Record (its server counts
    # normalised by its engine), measured from its raw chunks, then kept with its chunks packed
    # into arrays (packed.py), never the whole file as lists.
    records: list[Record] = []
    rows = RowBatch()
    with _collector_paused():
        for rec in store.typed_records(_read):
            records.append(rec)
            rows.add(rec)
    # Each row carries its launch's place in the round: the speedups weight the two launch orders
    # of a pair by who actually ran first (launchorder.py), as repeats: auto's looks did.
    df = launchorder.with_positions(metrics.frame_of(rows.rows()), launchorder.positions(manifest, cells))
    return RunData(
        manifest=manifest,
        records=records,
        cells=cells,
        df=df,
        env=store.env(),
        engine_args=argstore.read(root),
    )


def _read(line: dict[str, Any]) -> Record:
    """A line as the analysis keeps it: its chunks packed first (the metrics read the arrays)."""
    return read_record(pack(line))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the records are read. Parsing a record makes thousands
    of small lists (its chunk rows), and each few hundred allocations started a collection that
    walked every object alive, the records already loaded included: at 10,000 requests that was
    three quarters of the parsing time (issue 31). JSON makes no cycles, so nothing is left for
    the collector to find; it runs as usual again afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def pooled_acceptance(df: pd.DataFrame) -> float:
    """Σ accepted / Σ drafted over requests: the per-token acceptance of the whole arm."""
    drafted = df["draft_n"].sum()
    return float(df["draft_accepted"].sum() / drafted) if drafted > 0 else float("nan")


def arm_acceptance(run: RunData, arm: str) -> tuple[float, str]:
    """Pooled acceptance and its source: the per-request counts, else /metrics counter deltas."""
    if not run.speculates(arm):
        return pooled_acceptance(run.df[run.df["arm"] == arm]), acceptance.PER_REQUEST
    return acceptance.preferred_rate(acceptance_sources(run, arm))


def acceptance_sources(run: RunData, arm: str) -> dict[str, acceptance.Source]:
    """The arm's acceptance from every source that saw drafted tokens, each with its coverage:
    computed once per run, for the summary, the acceptance table and the findings alike."""
    key = ("acceptance_sources", arm)
    if key not in run._fits:
        run._fits[key] = acceptance.acceptance_sources(arm, run.df, run.cells, run.engine)
    return dict(run._fits[key])


def comparisons(run: RunData, metric: str = "decode_tok_s") -> dict[str, stats.Comparison]:
    """Each measured arm vs the baseline: ratio, CI (at the run's confidence, shared in one
    family) of the launch-level mixed model (prompts paired inside launch pairs), verdict faster /
    slower / equivalent / undetermined."""
    key = ("comparisons", metric)
    if key not in run._fits:
        run._fits[key] = _arm_comparisons(run.df, run, metric) if run.baseline in run.measured_arms else {}
    return dict(run._fits[key])


def _arm_comparisons(df: pd.DataFrame, run: RunData, metric: str) -> dict[str, stats.Comparison]:
    """Each measured arm in ``df`` vs the baseline, one family with ``df``'s categories (a run's
    chance of any false verdict, arms and categories together, stays 1 − run.confidence:
    :func:`specbench.analysis.multiplicity.judge`); an arm or baseline with too few values is LOW_N."""
    return _judged(df, run, metric)[0]


def _judged(
    df: pd.DataFrame, run: RunData, metric: str
) -> tuple[dict[str, stats.Comparison], dict[tuple[str, str], stats.Comparison]]:
    key = ("judged", metric)
    if df is run.df and key in run._fits:  # the arms' and the categories' share one fit
        return run._fits[key]  # type: ignore[no-any-return]
    arms = [a for a in run.measured_arms if a != run.baseline and (df["arm"] == a).any()]
    out = multiplicity.judge(df, arms, run.baseline, metric, 1 - run.confidence)
    if df is run.df:
        run._fits[key] = out
    return out


def category_comparisons(
    run: RunData, metric: str = "decode_tok_s"
) -> dict[tuple[str, str], stats.Comparison]:
    """(category, arm) → the arm's speedup over the baseline on that category's requests only:
    paired, launch-level, in one family with the arms (issue 27.5; each arm's α shared half with its
    categories, :func:`specbench.analysis.multiplicity.arms_and_categories`)."""
    key = ("category_comparisons", metric)
    if key not in run._fits:
        run._fits[key] = _category_comparisons(run, metric)
    return dict(run._fits[key])


def _category_comparisons(run: RunData, metric: str) -> dict[tuple[str, str], stats.Comparison]:
    if run.baseline not in run.measured_arms or run.df["category"].notna().sum() == 0:
        return {}
    return _judged(run.df, run, metric)[1]


def arm_summary(run: RunData) -> pd.DataFrame:
    """One row per arm: counts, medians, acceptance, speedup with CI and verdict (caveated when the
    arm or the baseline is UNSTABLE beyond any verdict)."""
    cmps = comparisons(run)
    unstable = noise.unstable_arms(run.df)
    rows = []
    for arm in run.arms:
        sub = run.df[run.df["arm"] == arm]
        status = run.manifest.get("arms", {}).get(arm, {}).get("status", "not run")
        # A baseline that failed or measured nothing is no yardstick: no "1.00×" (issue 44).
        broken = arm == run.baseline and (status == "failed" or sub.empty)
        rate, source = arm_acceptance(run, arm)
        failed = sum(1 for r in run.records if r.arm == arm and r.error and not r.warmup)
        rows.append(
            {
                "arm": arm,
                "status": status,
                "requests": len(sub),
                "errors": failed,
                "ttft_ms": sub["ttft_ms"].median(),
                "decode_tok_s": sub["decode_tok_s"].median(),
                "e2e_ms": sub["e2e_ms"].median(),
                "acceptance": rate,
                "acceptance_source": source,
                "speedup": _speedup(run, cmps, arm, broken),
                "ci_low": cmps[arm].ci_low if arm in cmps else np.nan,
                "ci_high": cmps[arm].ci_high if arm in cmps else np.nan,
                "confidence": cmps[arm].confidence if arm in cmps else np.nan,
                "verdict": "baseline (failed: no speedup)" if broken else _verdict(run, cmps, arm, unstable),
                "error_rate": stats.error_rate_text(cmps[arm]) if arm in cmps else "",
            }
        )
    return pd.DataFrame(rows)


def _speedup(run: RunData, cmps: dict[str, stats.Comparison], arm: str, broken: bool) -> float:
    if broken:
        return math.nan
    if arm == run.baseline:
        return 1.0
    return cmps[arm].ratio if arm in cmps else math.nan


def _verdict(run: RunData, cmps: dict[str, stats.Comparison], arm: str, unstable: set[str]) -> str:
    if arm == run.baseline:
        return "baseline"
    return noise.caveated(stats.verdict_text(cmps[arm]), arm, run.baseline, unstable) if arm in cmps else ""


# -- request-level extras ---------------------------------------------------------------------
def detail_frame(run: RunData) -> pd.DataFrame:
    """``run.df`` plus the request fields sweeps vary: ``max_tokens``, ``concurrency`` and the
    ``machine`` a merged run's record came from (NaN / None where a record lacks them)."""
    kept = [r for r in run.records if r.measured]
    df = run.df.drop(columns=[POSITION], errors="ignore")  # analysis-internal, not a request field
    if len(kept) != len(df):  # frame() changed its filter: fall back to no extras rather than misalign
        return df.assign(max_tokens=np.nan, concurrency=np.nan, machine=None)
    df["max_tokens"] = pd.to_numeric(pd.Series([r.max_tokens for r in kept]))
    df["concurrency"] = pd.to_numeric(pd.Series([r.concurrency for r in kept]))
    df["machine"] = [r.machine for r in kept]
    return df


ByPoint = dict[str, dict[str, stats.Comparison]]


def point_comparisons(run: RunData, metric: str = "decode_tok_s") -> ByPoint:
    """:func:`comparisons` at each operating point (issue 40): speedups never pool different
    request shapes or loads. A workload without a sweep is one point and one family (its arms and
    categories, as before); a sweep's arms at every level and their categories are one family
    (:func:`specbench.analysis.multiplicity.judge_points`)."""
    key = ("point_comparisons", metric)
    if key not in run._fits:
        run._fits[key] = _point_families(run, metric)
    return {point: dict(cmps) for point, cmps in run._fits[key].items()}


def _point_families(run: RunData, metric: str) -> ByPoint:
    out: ByPoint = {}
    pts = run.points
    for workload in dict.fromkeys(p.workload for p in pts):
        mine = [p.name for p in pts if p.workload == workload]
        sub = run.df[run.df["workload"] == workload]
        if len(mine) == 1:
            out[mine[0]] = _arm_comparisons(sub, run, metric) if run.baseline in set(sub["arm"]) else {}
            continue
        judged = _sweep_family(run, workload, metric)[0]
        out |= {name: {arm: c for (arm, p), c in judged.items() if p == name} for name in mine}
    return out


def _sweep_family(
    run: RunData, workload: str, metric: str
) -> tuple[dict[multiplicity.PointArm, stats.Comparison], dict[multiplicity.PointCategory, stats.Comparison]]:
    key = ("sweep_family", f"{workload}\0{metric}")
    if key not in run._fits:
        sub = run.df[run.df["workload"] == workload]
        arms = [a for a in run.measured_arms if a != run.baseline and (sub["arm"] == a).any()]
        found: tuple[dict[Any, stats.Comparison], dict[Any, stats.Comparison]] = ({}, {})
        if run.baseline in set(sub["arm"]):
            found = multiplicity.judge_points(
                sub, arms, run.baseline, metric, 1 - run.confidence, points.POINT
            )
        run._fits[key] = found
    return run._fits[key]  # type: ignore[no-any-return]


#: The metrics a point's restricted run reads from its sweep's family (its verdicts, the decision's
#: guard): any other metric is judged on the point alone.
FAMILY_METRICS = ("decode_tok_s", "e2e_ms")


def for_point(run: RunData, name: str) -> RunData:
    """``run`` restricted to one operating point's requests and records. At a sweep's point the
    verdicts are read from the sweep's family (:func:`point_comparisons`), so a per-point table
    and the sweep's answer never disagree."""
    point = next(p for p in run.points if p.name == name)
    sweep = points.several(run.points, point.workload)
    if not sweep:
        return for_workload(run, point.workload)
    phases = set(point.phases)
    sub = replace(
        run,
        df=run.df[run.df[points.POINT] == name],
        records=[
            r for r in run.records if str(r.workload) == point.workload and points.phase_of(r) in phases
        ],
    )
    sub._fits[("points", "")] = [point]  # its own frame would name it after the workload
    for metric in FAMILY_METRICS:
        arms, cats = _sweep_family(run, point.workload, metric)
        mine = {arm: c for (arm, p), c in arms.items() if p == name}
        sub._fits[("judged", metric)] = (
            mine,
            {(cat, arm): c for (cat, arm, p), c in cats.items() if p == name},
        )
        sub._fits[("point_comparisons", metric)] = {name: mine}
    return sub


# -- several workloads: each is judged on its own requests only ---------------------------------
def workload_names(run: RunData) -> list[str]:
    """The run's workloads in the matrix's order (then any others the records name)."""
    return _workload_order(run.manifest, run.df)


def _workload_order(manifest: dict[str, Any], df: pd.DataFrame) -> list[str]:
    matrix = manifest.get("matrix") or {}
    listed = [str(w.get("name") or w.get("suite")) for w in matrix.get("workloads") or []]
    seen = [str(w) for w in df["workload"].unique()] if "workload" in df else []
    return [w for w in listed if w in seen] + [w for w in seen if w not in listed]


def for_workload(run: RunData, workload: str) -> RunData:
    """``run`` restricted to one workload's measured requests and records."""
    return replace(
        run,
        df=run.df[run.df["workload"] == workload],
        records=[r for r in run.records if str(r.workload) == workload],
    )
