"""The report's plots: matplotlib figures on the Agg canvas (no pyplot state, no display), saved as PNG.

Each plot draws from an :class:`~specbench.analysis.result.Analysis` (its request frame ``detail``
and its tables) and returns None when its data are absent (no categories, no length or
concurrency sweep, a single machine): the report skips it instead of drawing an empty axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from specbench.analysis.result import Analysis
from specbench.analysis.tables.frames import MedianCI
from specbench.analysis.tables.measures import MEASURES
from specbench.report import fonts

DPI = 100
BASE_COLOUR, ARM_COLOUR = "#888888", "#1f77b4"


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    caption: str
    draw: Callable[[Analysis], Figure | None]


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _values(df: pd.DataFrame, column: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    x: np.ndarray[Any, np.dtype[np.float64]] = df[column].to_numpy(np.float64)
    finite: np.ndarray[Any, np.dtype[np.float64]] = x[np.isfinite(x)]
    return finite


BOX_MIN, NOTCH_MIN = 5, 10  # fewer points: no box (quartiles of 3 points mean nothing); no notch


def draw_box(ax: Any, position: int, d: np.ndarray[Any, np.dtype[np.float64]], ci: MedianCI) -> None:
    """One arm's summary: a median bar under BOX_MIN points, a box from there, and the notch
    (the bootstrap 95 % CI of the median) only from NOTCH_MIN points and only when it stays
    inside the box — a notch wider than the quartiles folds into a bow-tie that reads as data."""
    if d.size < BOX_MIN:
        # orange, as boxplot draws its medians
        ax.hlines(np.median(d), position - 0.25, position + 0.25, color="C1", lw=1.5, zorder=4)
        return
    _, low, high = ci
    q1, q3 = np.percentile(d, [25, 75])
    notch = d.size >= NOTCH_MIN and q1 <= low and high <= q3
    ax.boxplot(
        [d], positions=[position], notch=notch, conf_intervals=[(low, high)] if notch else None,
        showfliers=False, manage_ticks=False, widths=0.5,
    )  # fmt: skip


def _distribution(
    ax: Any, df: pd.DataFrame, arms: list[str], baseline: str, cis: dict[str, MedianCI], seed: int = 0
) -> None:
    """A box per arm (see :func:`draw_box`), the points as a jittered strip, and the baseline's
    median CI as a band across the axis."""
    data = [_values(df[df["arm"] == a], "decode_tok_s") for a in arms]
    keep = [i for i, d in enumerate(data) if d.size]
    if not keep:
        return
    data, names = [data[i] for i in keep], [arms[i] for i in keep]
    rng = np.random.default_rng(seed)
    for i, (name, d) in enumerate(zip(names, data, strict=True), 1):
        draw_box(ax, i, d, cis[name])
        colour = BASE_COLOUR if name == baseline else ARM_COLOUR
        ax.scatter(i + rng.uniform(-0.15, 0.15, d.size), d, s=9, alpha=0.5, color=colour, zorder=3)
    ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_xlim(0.4, len(names) + 0.6)
    if baseline in names:
        _, low, high = cis[baseline]
        ax.axhspan(low, high, color=BASE_COLOUR, alpha=0.2, label=f"{baseline} median 95 % CI")
        ax.legend(loc="best", fontsize=8)
    ax.set_ylabel("decode tok/s")
    ax.tick_params(axis="x", labelrotation=20)


def decode_distribution(a: Analysis) -> Figure | None:
    """Decode rate by arm; one panel per operating point where the run has several (issue 40: a
    sweep's levels pooled in one box read as one wide, two-humped distribution)."""
    run, df = a.run, a.detail
    if not df["decode_tok_s"].notna().any():
        return None
    if len(a.points) > 1:
        return _faceted(a, "point", order=[p.name for p in a.points])
    fig = new_figure(max(6.0, 1.3 * len(run.measured_arms) + 2), 4.5)
    ax = fig.add_subplot()
    _distribution(ax, df, run.measured_arms, run.baseline, a.decode_cis[("", "")])
    return fig


def _facets(count: int, height: float = 3.2, sharey: bool = True) -> tuple[Figure, list[Any]]:
    cols = min(3, count)
    rows = math.ceil(count / cols)
    fig = new_figure(5.0 * cols, height * rows)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, list(axes[:count])


def _faceted(a: Analysis, column: str, order: list[str] | None = None) -> Figure | None:
    """One decode-rate panel per value of ``column`` (in ``order`` where given); None unless
    there are at least two."""
    run, df = a.run, a.detail
    values = sorted(str(v) for v in df[column].dropna().unique())
    values = [v for v in order if v in values] if order else values
    if len(values) < 2:
        return None
    # A sweep's levels differ by multiples (450 vs 50 tok/s): each keeps its own scale.
    fig, axes = _facets(len(values), sharey=column != "point")
    notes = _category_notes(a) if column == "category" else {}
    for ax, value in zip(axes, values, strict=True):
        cis = a.decode_cis[(column, value)]
        _distribution(ax, df[df[column].astype(str) == value], run.measured_arms, run.baseline, cis)
        ax.set_title(value, fontsize=10)
        if value in notes:  # below the panel: the title stays the category alone
            ax.set_xlabel(notes[value], fontsize=7, wrap=True)
        ax.tick_params(axis="y", labelleft=True)  # shared y: every panel still reads its numbers
    return fig


def _category_notes(a: Analysis) -> dict[str, str]:
    """Per category, each arm's paired speedup with the interval its verdict used (the table's
    numbers): a panel of boxes alone invites reading a ratio of medians off it (issue 27.5)."""
    from specbench.report.tables import speedup_text

    notes: dict[str, list[str]] = {}
    for r in a.categories.speedups.to_dict("records"):
        verdict = str(r["verdict"]).split(" (", 1)[0]
        notes.setdefault(str(r["category"]), []).append(f"{r['arm']} {speedup_text(r)} {verdict}")
    return {k: "; ".join(v) for k, v in notes.items()}


def decode_by_category(a: Analysis) -> Figure | None:
    """Decode rate per category: pooled over a sweep's levels it would mix loads, so a run with
    several operating points draws its categories per point (the report's per-point tables)."""
    if len(a.points) > 1:
        return None
    return _faceted(a, "category")


def by_machine(a: Analysis) -> Figure | None:
    return _faceted(a, "machine")


def acceptance(a: Analysis) -> Figure | None:
    """Accepted / drafted per speculating arm, one bar per source (per-request counts, /metrics, log)."""
    rates: dict[str, dict[str, float]] = {arm: {} for arm in a.run.measured_arms if a.run.speculates(arm)}
    for row in a.acceptance.to_dict("records"):
        rates[str(row["arm"])][str(row["source"])] = row["rate"]
    sources = sorted({s for r in rates.values() for s in r})
    if not sources:
        return None
    fig = new_figure(max(6.0, 1.2 * len(rates) + 2), 4.0)
    ax = fig.add_subplot()
    width = 0.8 / len(sources)
    x = np.arange(len(rates))
    for i, source in enumerate(sources):
        bars = ax.bar(x + i * width, [r.get(source, np.nan) for r in rates.values()], width, label=source)
        ax.bar_label(bars, fmt="%.3f", fontsize=8)
    ax.set_xticks(x + width * (len(sources) - 1) / 2, list(rates), rotation=20)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accepted / drafted tokens")
    ax.legend(title="source", fontsize=8)
    return fig


def acceptance_by_position(a: Analysis) -> Figure | None:
    """Accepted / drafts at each draft position (position 0 first): where the drafter loses track."""
    frame = a.positions
    if frame.empty:
        return None
    fig = new_figure(7.0, 4.0)
    ax = fig.add_subplot()
    for arm, sub in frame.groupby("arm", sort=False):
        ax.plot(sub["position"] + 1, sub["rate"], "o-", label=str(arm))
    ax.set_xticks(sorted(frame["position"].unique() + 1))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / drafts")
    ax.legend(fontsize=8)
    return fig


def speedup_vs_length(a: Analysis) -> Figure | None:
    """Measured wall-clock speedup per requested length, the prefill + L/r model, and L*."""
    run, df = a.run, a.detail
    lengths = np.sort(df["max_tokens"].dropna().unique())
    if lengths.size < 2 or run.baseline not in run.measured_arms:
        return None
    e2e = df.pivot_table(index="max_tokens", columns="arm", values="e2e_ms", aggfunc="median")
    fig = new_figure(7.5, 4.5)
    ax = fig.add_subplot()
    grid = np.geomspace(lengths.min(), lengths.max(), 100)
    base_prefill, base_rate = a.length_model[run.baseline]
    for arm in (x for x in run.measured_arms if x != run.baseline and x in e2e.columns):
        line = ax.plot(e2e.index, e2e[run.baseline] / e2e[arm], "o-", label=f"{arm} measured")[0]
        prefill, rate = a.length_model[arm]
        model = (base_prefill / 1000 + grid / base_rate) / (prefill / 1000 + grid / rate)
        ax.plot(grid, model, ":", color=line.get_color(), label=f"{arm} prefill + L/r model")
        # the report table's L*: differences inside the noise band are none
        cross = a.crossover_lengths.get(arm)
        if cross is not None:
            ax.axvline(cross, color=line.get_color(), ls="--", lw=1, label=f"{arm} L* ≈ {cross:.0f} tokens")
    ax.axhline(1.0, color="black", lw=0.8)
    _log_ticks(ax, lengths)
    ax.set_xlabel("requested output tokens (max_tokens)")
    ax.set_ylabel(f"wall-clock speedup vs {run.baseline}")
    ax.legend(fontsize=8)
    return fig


def _log_ticks(ax: Any, values: Any) -> None:
    """Log x axis ticked at the values measured, labelled as plain integers."""
    ax.set_xscale("log")
    ax.set_xticks(list(values), [f"{v:g}" for v in values])
    ax.minorticks_off()


def latency_vs_concurrency(a: Analysis) -> Figure | None:
    run, df = a.run, a.detail
    if df["concurrency"].nunique() < 2:
        return None
    fig = new_figure(11.0, 4.2)
    axes = fig.subplots(1, 2)
    for ax, metric in zip(axes, ("ttft_ms", "e2e_ms"), strict=True):
        med = df.pivot_table(index="concurrency", columns="arm", values=metric, aggfunc="median")
        for arm in (x for x in run.measured_arms if x in med.columns):
            ax.plot(med.index, med[arm], "o-", label=arm)
        _log_ticks(ax, med.index.to_numpy())
        ax.set_xlabel("requests in flight")
        ax.set_ylabel(f"median {metric.replace('_ms', '')} ms")
        ax.legend(fontsize=8)
    return fig


def speedup_vs_level(a: Analysis) -> Figure | None:
    """A sweep over a numeric level (concurrency, length, rate): each arm's ratio to the baseline
    at every level with the interval its verdict used, the 1.0 line, one panel per measure."""
    frame = a.operating_points
    if frame.empty:
        return None
    swept = frame[frame["level"].notna()]
    swept = swept[swept.groupby(["workload", "measure"])["level"].transform("nunique") >= 2]
    if swept.empty:
        return None
    measures = list(dict.fromkeys(swept["measure"]))
    cols = min(3, len(measures))
    rows = math.ceil(len(measures) / cols)
    fig = new_figure(4.2 * cols, 3.4 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, measure in zip(axes, measures, strict=False):
        _speedup_panel(ax, swept[swept["measure"] == measure], measure, a.run.baseline)
    for ax in axes[len(measures) :]:
        ax.set_visible(False)
    return fig


AXES = {"concurrency": "requests in flight", "length": "output tokens asked", "rate": "request rate, req/s"}


def _speedup_panel(ax: Any, frame: pd.DataFrame, measure: str, baseline: str) -> None:
    several = frame["workload"].nunique() > 1
    for (workload, arm), sub in frame.groupby(["workload", "arm"], sort=False):
        sub = sub.sort_values("level")
        lo = (sub["ratio"] - sub["ci_low"]).clip(lower=0).fillna(0)
        hi = (sub["ci_high"] - sub["ratio"]).clip(lower=0).fillna(0)
        label = f"{workload}: {arm}" if several else str(arm)
        ax.errorbar(sub["level"], sub["ratio"], yerr=[lo, hi], fmt="o-", capsize=3, label=label)
    ax.axhline(1.0, color="black", lw=0.8)
    _log_ticks(ax, sorted(frame["level"].unique()))
    kinds = {
        "concurrency": "requests in flight",
        "length": "output tokens asked",
        "rate": "request rate, req/s",
    }
    ax.set_xlabel(kinds.get(str(frame["level_kind"].iloc[0]), "level"))
    ax.set_title(f"{MEASURES[measure].label}" + (" (decides)" if frame["decides"].any() else ""), fontsize=9)
    ax.set_ylabel(f"× vs {baseline}")
    ax.legend(fontsize=7)


def goodput_vs_rate(a: Analysis) -> Figure | None:
    """A rate sweep: goodput (mean over launches, t interval at the run's confidence) and median
    e2e per rate and arm."""
    table = a.goodput.table
    if table.empty:
        return None
    fig = new_figure(11.0, 4.2)
    axes = fig.subplots(1, 2)
    for arm, sub in table.groupby("arm", sort=False):
        err = [sub["goodput_req_s"] - sub["goodput_lo"], sub["goodput_hi"] - sub["goodput_req_s"]]
        axes[0].errorbar(
            sub["rate"], sub["goodput_req_s"], yerr=np.nan_to_num(err), fmt="o-", capsize=3, label=arm
        )
        axes[1].plot(sub["rate"], sub["e2e_ms"], "o-", label=arm)
    for ax, label in zip(axes, ("goodput req/s (met every SLO)", "median e2e ms"), strict=True):
        _log_ticks(ax, sorted(table["rate"].unique()))
        ax.set_xlabel("request rate asked, req/s")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return fig


PLOTS = (
    Plot("decode_by_arm", "Decode rate by arm", "one point per request; box = quartiles (from 5 "
         "requests, a bar at the median below), notch = 95 % CI of the median (from 10, when it fits "
         "inside the box); grey band = the baseline median's 95 % CI", decode_distribution),
    Plot("decode_by_category", "Decode rate by prompt category", "the same, per category: a speculative "
         "arm that only wins on some categories shows here (docs/mistakes.md, 5)", decode_by_category),
    Plot("acceptance", "Acceptance by arm and source", "accepted / drafted tokens from each source; "
         "sources should agree (docs/mistakes.md, 2)", acceptance),
    Plot("acceptance_by_position", "Acceptance per draft position", "share of drafts whose i-th token "
         "was accepted (per-position counters, e.g. vLLM)", acceptance_by_position),
    Plot("speedup_vs_level", "Speedup at each level of the sweep", "each arm's ratio to the baseline "
         "per level and measure (above 1: the arm is better), with the interval its verdict used; a "
         "sign that flips across the 1.0 line is a crossover (issue 40)", speedup_vs_level),
    Plot("speedup_vs_length", "Wall-clock speedup vs output length", "measured median e2e ratio per length, "
         "the prefill + L/r model and its crossover L* (docs/mistakes.md, 7)", speedup_vs_length),
    Plot("latency_vs_concurrency", "TTFT and e2e vs concurrency", "median per concurrency level "
         "(docs/mistakes.md, 9: concurrency can flip the sign)", latency_vs_concurrency),
    Plot("decode_by_machine", "Decode rate per machine", "one panel per machine of a merged run", by_machine),
    Plot("goodput_vs_rate", "Goodput and e2e vs request rate", "rate sweep: goodput per arm (mean over "
         "launches, interval at the run's confidence) and median e2e at each rate asked "
         "(docs/goodput.md)", goodput_vs_rate),
)  # fmt: skip


def write_plots(a: Analysis, folder: Path) -> list[tuple[Plot, Path]]:
    """Every plot whose data exist, saved as ``folder/<name>.png``; stale PNGs are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    with matplotlib.rc_context({"font.family": fonts.families()}):  # CJK labels draw as glyphs
        for plot in PLOTS:
            path = folder / f"{plot.name}.png"
            path.unlink(missing_ok=True)
            fig = plot.draw(a)
            if fig is not None:
                fig.suptitle(plot.title)  # the one title: panels carry only their facet's name
                fig.savefig(path, format="png")
                out.append((plot, path))
    return out
