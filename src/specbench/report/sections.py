"""The report's content, in reading order: findings first — what a reader must know before
trusting any number — then the decision, then the numbers that support it, then the plots."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from specbench.analysis import RunData
from specbench.analysis.result import Analysis
from specbench.analysis.tables.frames import Categories
from specbench.report import by_workload, fonts, tables
from specbench.report.answer import along_lines, answer_lines, rates_text
from specbench.report.envfile import described_workloads
from specbench.report.goodput import goodput_blocks
from specbench.report.page.document import Block, Bullets, Figure, Heading, Para, Table
from specbench.report.plots import Plot
from specbench.report.predicted import predicted_blocks
from specbench.report.prompts import prompt_blocks
from specbench.report.tune import tune_blocks


def _answer(c: Analysis) -> list[Block]:
    """The answer first (issue 28.1): per workload what to ship, its speedup and interval, and
    where the kinds of prompt disagree, the per-category answer with its acceptance."""
    lines = answer_lines(c)
    if not lines:
        return []
    return [Heading("Answer"), Bullets(tuple(line.strip() for line in lines))]


def _findings(c: Analysis) -> list[Block]:
    if not c.findings:
        return [Heading("Findings"), Para("No check flagged this run.")]
    severities = [f.severity for f in c.findings]
    counts = [(sev, severities.count(sev)) for sev in ("error", "warning", "info") if sev in severities]
    line = ", ".join(f"{n} {sev}{'s' if n > 1 and sev != 'info' else ''}" for sev, n in counts)
    return [
        Heading("Findings"),
        Para(f"{line}; most serious first. One row per code, with every arm it names."),
        Table(tables.findings_table(c.findings)),
    ]


def _decision(c: Analysis) -> list[Block]:
    rule = (
        "Rule, at each operating point: recommend the arm with the largest speedup on the point's "
        f"objective whose interval lies above 1.01 (verdict faster) vs {c.run.baseline}, whose guard "
        "(decode: wall clock; throughput: TTFT p99) is not significantly worse, and that no "
        "error-severity finding names; otherwise keep speculation off. The objective is the "
        "workload's `objective`, else its suite's (decode for batch-1 suites, throughput for "
        "concurrent ones, goodput for rate sweeps). " + _error_rates(c)
    )
    if not c.decisions:
        return [Heading("Decision"), Para("No measured requests: nothing to decide."), Para(rule)]
    return [Heading("Decision"), Table(tables.decision_table(c.decisions)), Para(rule)]


def _error_rates(c: Analysis) -> str:
    """Which error rate the speedup verdicts carry (issue 27, multiplicity), in one sentence."""
    texts = rates_text([str(t) for t in c.by_workload.get("error_rate", pd.Series(dtype=str)) if t])
    if not texts:
        return ""
    return f"Speedup intervals and verdicts: {texts} (docs/statistics.md, Multiplicity)."


def _context(run: RunData, run_dir: Path) -> list[Block]:
    matrix = run.manifest.get("matrix") or {}
    failed = sum(1 for r in run.records if r.error is not None and not r.warmup)
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


def _crossover(c: Analysis, workload: str | None = None, level: int = 2) -> list[Block]:
    """The crossover section of one workload (``None``: the run's only one): a length sweep's,
    over all its lengths."""
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


def _by_workload(c: Analysis, workloads: list[str]) -> list[Block]:
    """Several workloads: the workload-by-arm table, then one section per workload with its
    decision, per-arm table, crossover and categories, each from that workload's requests only."""
    table = by_workload.speedup_table(c.by_workload, workloads, c.run.arms, c.run.baseline)
    blocks: list[Block] = [
        Heading("Workloads by arm"),
        Table(
            table, f"decode speedup vs {c.run.baseline} (the CI its verdict used) and verdict, per workload"
        ),
        Para(_error_rates(c)),
    ]
    decided = {d.workload: d for d in c.decisions}
    words = dict(described_workloads(c.run.manifest.get("matrix") or {}))
    where = {p.name: p for p in c.points}
    swept: set[str] = set()
    for workload in workloads:  # each operating point: a workload, or one level of a sweep
        point = where.get(workload)
        owner = point.workload if point is not None else workload
        if owner == workload:
            blocks += [Heading(f"Workload {workload}"), Para(words.get(workload, workload) + ".")]
        else:
            if owner not in swept:  # the sweep's own section before its first level
                blocks += [*_sweep(c, owner, words.get(owner, owner)), *_crossover(c, owner, 3)]
                swept.add(owner)
            blocks.append(Heading(f"Operating point {workload}", 3))
        if workload in decided:
            d = decided[workload]
            blocks.append(Para(f"Decision: {d.recommendation} — {d.reason}."))
        caption = "medians with 95 % bootstrap CIs; decode speedup with the CI its verdict used"
        blocks.append(Table(tables.arm_table(c.by_workload, workload), caption))
        blocks += _crossover(
            c, workload, 3 if owner == workload else 4
        )  # a level's own, unless L* spans them
        blocks += _categories(c.workload_categories[workload], c.run.baseline, 3 if owner == workload else 4)
    return blocks


def _sweep(c: Analysis, workload: str, words: str) -> list[Block]:
    """A sweep's section: its verdicts along the levels, every measure at every level."""
    along = next((s for s in c.sweeps if s.workload == workload), None)
    table = tables.sweep_table(c.operating_points, workload, c.run.arms)
    blocks: list[Block] = [Heading(f"Workload {workload} (a sweep)"), Para(words + ".")]
    if along is not None:
        blocks.append(Bullets(tuple(line.strip() for line in along_lines(along))))
    if not table.empty:
        caption = (
            f"each arm vs {c.run.baseline} at each level, on every measure (× above 1: the arm is better), "
            "with the interval its verdict used; * the measure that decides. Throughput, TTFT and e2e "
            "percentiles are one value per launch, compared per launch pair; decode per request, paired "
            "by prompt inside launch pairs. Each measure's comparisons along the sweep are one family."
        )
        blocks.append(Table(table, caption))
    return blocks


#: What the ITL column's median means where tokens arrive in rounds (issue 28: 0.05 ms for an
#: n-gram arm beside 14.64 ms for the baseline, with no word on why).
ITL_NOTE = (
    "ITL is the median gap a token waited after the one before it, as the client read the stream. "
    "A speculative arm delivers a verification round's accepted tokens together (llama.cpp sends "
    "them as separate chunks microseconds apart), so where most tokens come in rounds its median "
    "ITL is the gap inside a round, not the cost per token: compare arms on decode tok/s and e2e."
)


def _per_arm(c: Analysis) -> list[Block]:
    note = "Medians with 95 % bootstrap CIs in parentheses. " + ITL_NOTE + " " + _error_rates(c)
    blocks: list[Block] = [Heading("Per arm"), Para(note.strip())]
    for point in c.by_workload["point"].unique() if not c.by_workload.empty else ():
        blocks.append(Table(tables.arm_table(c.by_workload, str(point)), f"workload {point}"))
    return blocks


def _machines(c: Analysis) -> list[Block]:
    if c.machines is None:
        return []
    table = tables.machine_table(c.machines)
    caption = "decode speedup vs the baseline measured on the same machine"
    return [Heading("Per machine"), Table(table, caption)]


def _categories(cats: Categories, baseline: str, level: int = 2) -> list[Block]:
    table = tables.category_table(cats, baseline)
    if table.empty:
        return []
    levels = sorted({float(v) for v in cats.speedups["confidence"].dropna()})
    family = int(cats.speedups["family"].max()) if len(cats.speedups) else 1
    level_text = "/".join(f"{v * 100:.3g} %" for v in levels) or "95 %"
    caption = (
        f"decode speedup vs {baseline} on each category's requests: paired by prompt inside launch "
        f"pairs, {level_text} CI; the categories share the run's error rate with the arms, one "
        f"family of {family} comparisons, each arm's α shared half with its categories "
        "(docs/statistics.md); drafted / accepted: the arm's draft tokens there"
    )
    blocks: list[Block] = [Heading("Per prompt category", level), Table(table, caption)]
    return [*blocks, Bullets(tuple(cats.splits))] if cats.splits else blocks


def _acceptance(c: Analysis) -> list[Block]:
    frame = c.acceptance
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
        *_positions(c.positions),
    ]


def _positions(positions: pd.DataFrame) -> list[Block]:
    if positions.empty:
        return []
    return [Table(tables.position_table(positions), "accepted / drafts per draft position")]


def _equivalence(c: Analysis) -> list[Block]:
    table = tables.equivalence_table(c.equivalence)
    if table.empty:
        return []
    blocks: list[Block] = [Heading(f"Output equivalence vs {c.run.baseline}"), Table(table)]
    examples = c.divergences
    if not examples.empty:
        blocks.append(Table(examples, "first differing outputs, cut around the first difference"))
    return blocks


def _plots(run: RunData, plots: list[tuple[Plot, Path]]) -> list[Block]:
    if not plots:
        return []
    return [
        Heading("Plots"),
        *font_note(run),
        *(Figure(path, plot.title, plot.caption) for plot, path in plots),
    ]


def font_note(run: RunData) -> list[Block]:
    """The stated fallback: without a CJK font, CJK arm names and categories draw as boxes."""
    labels = [*run.measured_arms, *(str(c) for c in run.df["category"].dropna().unique())]
    if fonts.cjk_family() is not None or not any(fonts.has_cjk(label) for label in labels):
        return []
    return [
        Para(f"This machine has no CJK font, so CJK labels in the plots show as boxes: {fonts.INSTALL_HINT}.")
    ]


def _measured(c: Analysis) -> list[Block]:
    if len(c.points) > 1:  # several workloads, or a sweep's levels: one section each
        return _by_workload(c, [p.name for p in c.points])
    return [*_crossover(c), *_per_arm(c)]


def report_blocks(c: Analysis, run_dir: Path, plots: list[tuple[Plot, Path]]) -> list[Block]:
    return [
        Heading(f"specbench report: {run_dir.name}", 1),
        *_answer(c),
        *_findings(c),
        *_decision(c),
        *tune_blocks(run_dir),
        *predicted_blocks(c.theory),
        *_context(c.run, run_dir),
        *_measured(c),
        *goodput_blocks(c.goodput, c.run.baseline, c.run.confidence),
        *_machines(c),
        *(_categories(c.categories, c.run.baseline) if len(c.points) < 2 else []),
        *_acceptance(c),
        *_equivalence(c),
        *prompt_blocks(c.prompts),
        *_plots(c.run, plots),
    ]
