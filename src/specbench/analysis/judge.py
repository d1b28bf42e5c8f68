"""Every finding about a run, most serious first: what a reader must know before trusting a number."""

from __future__ import annotations

from dataclasses import replace

from specbench.analysis import busy, checks, evidence, launches, stability, stalls, stats, unseen
from specbench.analysis.checks import Finding
from specbench.analysis.clientlag import client_lag_findings, schedule_findings
from specbench.analysis.finding import SEVERITY_ORDER
from specbench.analysis.points import Point
from specbench.analysis.rundata import RunData, comparisons, for_point
from specbench.analysis.verifystep import verify_step_findings


def findings(run: RunData) -> list[Finding]:
    """Every finding, most serious first: what a reader must know before trusting a number."""
    out: list[Finding] = []
    engine = run.engine
    patterns = engine.fallback_patterns()
    for arm in run.arms:
        out += _speculation_findings(run, arm, patterns)
    if run.baseline in run.arms:
        out += checks.confounds(
            {a: run.arm_args(a) for a in run.arms},
            run.baseline,
            engine=engine,
            cells=run.cells,
            stored=run.engine_args,  # the table the run used, not the one installed here
        )
        out += checks.output_drift(checks.output_texts(run.records), run.measured_arms, run.baseline)
        out += checks.toolcall_mismatch(run.records, run.measured_arms, run.baseline)
    out += _evidence_findings(run)
    out += verify_step_findings(run)  # rounds just past a step in the probed verify cost
    lag = client_lag_findings(run.cells, run.df)
    out += lag + schedule_findings(run.records)
    out += _statistical_findings(run, {f.arms[0] for f in lag if f.code == "CLIENT_BEHIND"})
    return sorted(out, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def _evidence_findings(run: RunData) -> list[Finding]:
    """What the records and cells say about the measurement itself: cache, client vs server, load."""
    arms = run.measured_arms
    return (
        evidence.cached_prefill(run.df, arms, run.cells)
        + evidence.client_server_disagreement(run.df, arms)
        + evidence.untimed_decode(run.df, arms)
        + busy.busy_findings(run.cells, arms)
    )


def _speculation_findings(run: RunData, arm: str, patterns: list[str]) -> list[Finding]:
    """Speculation state, acceptance sources and self-draft for one arm configured to speculate."""
    args, engine = run.arm_args(arm), run.engine
    if not checks.speculates(args, engine):
        return []
    out = checks.silent_fallback(arm, args, run.df, run.cells, patterns, engine)
    found = checks.acceptance_sources(arm, run.df, run.cells, engine)
    artefacts = checks.acceptance_artefact(arm, run.df, found, run.records, run.cells)
    model = str(run.manifest.get("matrix", {}).get("model", ""))
    selfdraft = checks.self_draft(arm, args, model, engine, env=run.env, found=found)
    if selfdraft is not None:  # 100 % is expected of a self-draft: say so (quoting every source)
        artefacts = []  # instead of "artefact"
        out.append(selfdraft)
    return out + artefacts


def _statistical_findings(run: RunData, client_behind: set[str]) -> list[Finding]:
    """The statistical findings, at each operating point where the run sweeps (issue 40: the
    requests of one level finish together, so pooled levels read as DRIFT and as two modes)."""
    if run.df.empty:
        return []
    if not run.sweeps:
        return _point_findings(run, client_behind)
    return [_at(f, p) for p in run.points for f in _point_findings(for_point(run, p.name), client_behind)]


def _at(f: Finding, p: Point) -> Finding:
    """``f`` computed at point ``p``: its evidence says where (once)."""
    evidence = f.evidence if p.name in f.evidence else f"at {p.name}: {f.evidence}"
    return replace(f, evidence=evidence, point=p.name)


def _point_findings(run: RunData, client_behind: set[str]) -> list[Finding]:
    out = [
        Finding(w.code, (w.arm,), w.message, "error" if w.severe else "warning")
        for w in stability.stability_warnings(run.df, baseline=run.baseline, client_behind=client_behind)
    ]
    speculating = {a for a in run.arms if run.speculates(a)}  # only their silent servers may draft
    out += stalls.stall_findings(run.records, run.measured_arms, run.df, run.baseline, speculating)
    out += stalls.bimodal_findings(run.df, run.records, run.cells, run.measured_arms, speculating)
    cmps = comparisons(run)
    out += _low_n_findings(run, cmps)
    for arm, cmp in cmps.items():
        if run.speculates(arm):  # declared or configured: is its speed the only sign, and the baseline's?
            out += unseen.same_as_baseline(arm, run.df, run.cells, cmp, run.engine)
        if cmp.verdict == "slower":
            out.append(
                Finding(
                    "SPEC_LOSS",
                    (arm, run.baseline),
                    f"{arm} is slower than {run.baseline}: decode speed ×{cmp.ratio:.3f} "
                    f"({stats.ci_label(cmp)} CI {cmp.ci_low:.3f}–{cmp.ci_high:.3f}).",
                    spec_loss_severity(cmp.ci_high),
                )
            )
    return out


def _low_n_findings(run: RunData, cmps: dict[str, stats.Comparison]) -> list[Finding]:
    """An arm paired with the baseline over fewer launch pairs than a verdict needs, or either of
    them with fewer than two usable values (issue 29: a baseline with one successful request):
    the verdict is undetermined, never an exception."""
    return [
        Finding("LOW_N", (arm, run.baseline), _low_n_text(run, arm, c)) for arm, c in cmps.items() if c.low_n
    ]


def _low_n_text(run: RunData, arm: str, c: stats.Comparison) -> str:
    if c.too_few:
        return (
            f"{arm} vs {run.baseline}: {c.n_a} usable {c.metric} value(s) for {arm} and {c.n_b} for "
            f"{run.baseline}; a comparison needs ≥ 2 in each — undetermined, rerun the failed requests "
            "or raise repeats."
        )
    return (
        f"{arm} vs {run.baseline}: only {c.n_launches} launch pair(s); a verdict needs "
        f"≥ {launches.MIN_LAUNCHES} (the server launch is the unit of replication) — "
        "undetermined, raise repeats."
    )


LARGE_LOSS = 0.8  # CI upper bound below this: at least a 20 % slowdown, whatever the noise


def spec_loss_severity(ci_high: float) -> str:
    """A significant slowdown is a warning; one whose whole CI lies below ×0.8 is an error, above a
    doubtful acceptance figure (warning) — a user publishing that arm publishes a loss."""
    return "error" if ci_high < LARGE_LOSS else "warning"
