"""The report's content, in reading order: findings first — what a reader must know before
trusting any number — then the decision, then the numbers that support it, then the plots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specbench import analysis
from specbench.analysis import Decision, RunData, crossover
from specbench.analysis.checks import Finding
from specbench.report import by_workload, fonts, tables
from specbench.report.document import Block, Bullets, Figure, Heading, Para, Table
from specbench.report.envfile import described_workloads
from specbench.report.goodput import goodput_blocks
from specbench.report.plots import Plot
from specbench.report.predicted import predicted_blocks
from specbench.report.tune import tune_blocks


@dataclass(frozen=True)
class Computed:
    """Everything derived from the run once, shared by every output format."""

    run: RunData
    found: list[Finding]
    decisions: list[Decision]
    summary: pd.DataFrame
    crossovers: pd.DataFrame
    winners: pd.DataFrame


def crossover_frame(run: RunData) -> pd.DataFrame:
    """Per workload and arm: the crossover formula's inputs, L* and the case it is in (numeric
    columns); each workload's from its own requests only."""
    frames = [
        _crossover_rows(by_workload.only(run, w)).assign(workload=w) for w in by_workload.workload_names(run)
    ]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["workload", *out.columns.drop("workload")]]


def _winners(run: RunData) -> pd.DataFrame:
    """:func:`crossover.wall_clock_winners` per workload, with a workload column first."""
    frames = [
        crossover.wall_clock_winners(by_workload.only(run, w)).assign(workload=w)
        for w in by_workload.workload_names(run)
    ]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["workload", "max_tokens", "winner"])
    out = pd.concat(frames, ignore_index=True)
    return out[["workload", *out.columns.drop("workload")]]


def _crossover_rows(run: RunData) -> pd.DataFrame:
    if run.baseline not in run.measured_arms:
        return pd.DataFrame()
    rows = []
    for arm in (a for a in run.measured_arms if a != run.baseline):
        x = crossover.crossover_inputs(run, arm)  # once: it runs two paired comparisons
        base_prefill, taxed, base_rate, gained = x.terms()
        length = crossover.crossover_length(*x.terms())
        prefill, rate = crossover.arm_medians(run.df, arm)
        rows.append({
            "arm": arm, "prefill_column": crossover.prefill_column(run.df),
            "prefill_baseline_ms": base_prefill, "prefill_arm_ms": prefill,
            "prefill_tax_s": (taxed - base_prefill) / 1000, "decode_baseline_tok_s": base_rate,
            "decode_arm_tok_s": rate, "crossover_tokens": length,
            "regime": crossover.crossover_regime(base_prefill, taxed, base_rate, gained)
            + _noise_note(x.prefill_verdict, x.decode_verdict),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _noise_note(prefill: str, decode: str) -> str:
    """Which differences the crossover ignored, and why: their 95 % CI sits inside the noise band
    ("equivalent") or straddles its edge ("undetermined": more launches could still show one)."""
    words = {"equivalent": "equal within the noise band", "undetermined": "difference undetermined"}
    notes = [f"{name} {words[v]}" for name, v in (("prefill", prefill), ("decode", decode)) if v in words]
    return f" ({'; '.join(notes)})" if notes else ""


def compute(run: RunData) -> Computed:
    found = analysis.findings(run)
    return Computed(
        run=run,
        found=found,
        decisions=analysis.decision_table(run, found=found),
        summary=tables.summary_frame(run),
        crossovers=crossover_frame(run),
        winners=_winners(run),
    )


def _findings(c: Computed) -> list[Block]:
    if not c.found:
        return [Heading("Findings"), Para("No check flagged this run.")]
    severities = [f.severity for f in c.found]
    counts = [(sev, severities.count(sev)) for sev in ("error", "warning", "info") if sev in severities]
    line = ", ".join(f"{n} {sev}{'s' if n > 1 and sev != 'info' else ''}" for sev, n in counts)
    return [Heading("Findings"), Para(f"{line}; most serious first."), Table(tables.findings_table(c.found))]


def _decision(c: Computed) -> list[Block]:
    rule = (
        "Rule: recommend the arm with the largest decode speedup whose 95 % CI lies above 1.01 "
        f"(verdict faster) vs {c.run.baseline}, whose wall clock is not significantly slower, and "
        "that no error-severity finding names; otherwise keep speculation off."
    )
    if not c.decisions:
        return [Heading("Decision"), Para("No measured requests: nothing to decide."), Para(rule)]
    return [Heading("Decision"), Table(tables.decision_table(c.decisions)), Para(rule)]


def _context(run: RunData, run_dir: Path) -> list[Block]:
    matrix = run.manifest.get("matrix") or {}
    failed = sum(1 for r in run.records if r.get("error") is not None and not r.get("warmup"))
    # "compared with X" reads right whether the baseline arm is called "baseline" or "off".
    return [
        Heading("Run"),
        Para(
            f"{run_dir.name}: engine {matrix.get('engine', '?')}, model {matrix.get('model', '?')}, "
            f"{len(run.df)} measured requests ({failed} failed) over {len(run.measured_arms)} arms, "
            f"each compared with the arm {run.baseline}. {_workloads_in_words(matrix)}. Environment "
            "and exact command lines: BENCHMARK_ENV.md."
        ),
    ]


def _workloads_in_words(matrix: dict[str, object]) -> str:
    named = described_workloads(matrix)
    if len(named) == 1:
        return f"Workload: {named[0][1]}"
    return f"Workloads ({len(named)}): " + "; ".join(f"{name} ({text})" for name, text in named)


def _crossover(c: Computed, workload: str | None = None, level: int = 2) -> list[Block]:
    """The crossover section of one workload (``None``: the run's only one)."""
    crossovers, winners = c.crossovers, c.winners
    if workload is not None and not crossovers.empty:
        crossovers = crossovers[crossovers["workload"] == workload]
        winners = winners[winners["workload"] == workload]
    if crossovers.empty:
        return []
    shown = pd.DataFrame({
        "arm": crossovers["arm"],
        f"prefill ms ({crossovers['prefill_column'].iloc[0]}) baseline → arm": [
            f"{tables.fmt(b, '.0f')} → {tables.fmt(a, '.0f')}"
            for b, a in zip(crossovers["prefill_baseline_ms"], crossovers["prefill_arm_ms"], strict=True)
        ],
        "decode tok/s baseline → arm": [
            f"{tables.fmt(b)} → {tables.fmt(a)}"
            for b, a in zip(crossovers["decode_baseline_tok_s"], crossovers["decode_arm_tok_s"], strict=True)
        ],
        "L* tokens": [tables.fmt(v, ".0f") if v is not None and not math.isnan(v) else "—"
                      for v in crossovers["crossover_tokens"]],
        "on wall clock the arm": crossovers["regime"],
    })  # fmt: skip
    blocks: list[Block] = [
        Heading("Crossover length", level),
        Para("L* = (prefill_arm − prefill_baseline) / (1/r_baseline − 1/r_arm), medians over the "
             + ("run." if workload is None else "workload's requests.")),
        Table(shown),
    ]  # fmt: skip
    if not winners.empty:
        win = winners.drop(columns="workload")
        for col in win.columns.drop(["max_tokens", "winner"]):
            win[col] = win[col].map(lambda v: tables.fmt(v, ".0f"))
        win["max_tokens"] = win["max_tokens"].map(lambda v: tables.fmt(v, ".0f"))
        blocks.append(Table(win, "Measured median e2e ms per requested length, and the wall-clock winner"))
    return blocks


def _by_workload(c: Computed, workloads: list[str]) -> list[Block]:
    """Several workloads: the workload-by-arm table, then one section per workload with its
    decision, per-arm table, crossover and categories, each from that workload's requests only."""
    table = by_workload.speedup_table(c.summary, workloads, c.run.arms, c.run.baseline)
    blocks: list[Block] = [
        Heading("Workloads by arm"),
        Table(table, f"decode speedup vs {c.run.baseline} (95 % CI) and verdict, per workload"),
    ]
    decided = {d.workload: d for d in c.decisions}
    words = dict(described_workloads(c.run.manifest.get("matrix") or {}))
    for workload in workloads:
        blocks += [Heading(f"Workload {workload}"), Para(words.get(workload, workload) + ".")]
        if workload in decided:
            d = decided[workload]
            blocks.append(Para(f"Decision: {d.recommendation} — {d.reason}."))
        blocks.append(Table(tables.arm_table(c.summary, workload), "medians with 95 % bootstrap CIs"))
        blocks += _crossover(c, workload, 3)
        blocks += _categories(by_workload.only(c.run, workload), 3)
    return blocks


def _per_arm(c: Computed) -> list[Block]:
    blocks: list[Block] = [Heading("Per arm"), Para("Medians with 95 % bootstrap CIs in parentheses.")]
    for workload in c.summary["workload"].unique() if not c.summary.empty else ():
        blocks.append(Table(tables.arm_table(c.summary, str(workload)), f"workload {workload}"))
    return blocks


def _machines(run: RunData) -> list[Block]:
    df = analysis.detail_frame(run)
    if df["machine"].nunique() < 2:
        return []
    table = tables.machine_table(df, run.baseline, run.measured_arms)
    caption = "decode speedup vs the baseline measured on the same machine"
    return [Heading("Per machine"), Table(table, caption)]


def _categories(run: RunData, level: int = 2) -> list[Block]:
    table = tables.category_table(run)
    if table.empty:
        return []
    blocks: list[Block] = [
        Heading("Per prompt category", level),
        Table(table, "median decode tok/s; × = vs baseline"),
    ]
    splits = tables.category_splits(run)
    return [*blocks, Bullets(tuple(splits))] if splits else blocks


def _acceptance(run: RunData) -> list[Block]:
    frame = tables.acceptance_frame(run)
    if frame.empty:
        return []
    note = (
        "Acceptance = accepted / drafted tokens per source: response timings (draft_n_accepted / draft_n), "
        "/metrics counter deltas, server log lines. Mean accepted length counts the bonus token."
    )
    return [
        Heading("Acceptance by source"),
        Para(note),
        Table(tables.acceptance_table(frame)),
        *_positions(run),
    ]


def _positions(run: RunData) -> list[Block]:
    positions = tables.position_frame(run)
    if positions.empty:
        return []
    shown = positions.pivot_table(index="position", columns="arm", values="rate").map(tables.fmt_rate)
    shown.index = shown.index + 1
    return [Table(shown.reset_index().rename_axis(columns=None), "accepted / drafts per draft position")]


def _equivalence(run: RunData) -> list[Block]:
    table = tables.equivalence_table(run)
    if table.empty:
        return []
    blocks: list[Block] = [Heading(f"Output equivalence vs {run.baseline}"), Table(table)]
    examples = tables.divergence_examples(run)
    if not examples.empty:
        blocks.append(Table(examples, "first differing outputs, cut around the first difference"))
    return blocks


def _plots(run: RunData, plots: list[tuple[Plot, Path]]) -> list[Block]:
    if not plots:
        return []
    return [
        Heading("Plots"),
        *_font_note(run),
        *(Figure(path, plot.title, plot.caption) for plot, path in plots),
    ]


def _font_note(run: RunData) -> list[Block]:
    """The stated fallback: without a CJK font, CJK arm names and categories draw as boxes."""
    labels = [*run.measured_arms, *(str(c) for c in run.df["category"].dropna().unique())]
    if fonts.cjk_family() is not None or not any(fonts.has_cjk(label) for label in labels):
        return []
    return [
        Para(f"This machine has no CJK font, so CJK labels in the plots show as boxes: {fonts.INSTALL_HINT}.")
    ]


def _measured(c: Computed) -> list[Block]:
    workloads = by_workload.workload_names(c.run)
    if len(workloads) > 1:
        return _by_workload(c, workloads)
    return [*_crossover(c), *_per_arm(c)]


def report_blocks(c: Computed, run_dir: Path, plots: list[tuple[Plot, Path]]) -> list[Block]:
    return [
        Heading(f"specbench report: {run_dir.name}", 1),
        *_findings(c),
        *_decision(c),
        *tune_blocks(run_dir),
        *predicted_blocks(c.run, run_dir),
        *_context(c.run, run_dir),
        *_measured(c),
        *goodput_blocks(c.run),
        *_machines(c.run),
        *(_categories(c.run) if len(by_workload.workload_names(c.run)) < 2 else []),
        *_acceptance(c.run),
        *_equivalence(c.run),
        *_plots(c.run, plots),
    ]
