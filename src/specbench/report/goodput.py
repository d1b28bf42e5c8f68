"""The report's "Goodput and load" section: goodput per arm against the matrix's SLOs and, for a
rate sweep, the highest rate each arm carries within them and the load above which speculation
stops paying (computed in :mod:`specbench.analysis.tables.goodput`)."""

from __future__ import annotations

import pandas as pd

from specbench.analysis.stats import level_label
from specbench.analysis.tables.goodput import Goodput
from specbench.matrix.config import SLOSpec
from specbench.report.page.document import Block, Heading, Para, Table
from specbench.report.tables import fmt, fmt_ci

DEFINITION = (
    "Goodput: requests per second (and their output tokens per second) that met every SLO, over "
    "the phase's duration from the first send to the last end, as vllm bench serve --goodput "
    "counts it; mean over launches with its {level} t interval; × is the goodput ratio to {base} "
    "paired by launch pair."
)


def _slo_words(slo: SLOSpec | None) -> str:
    if slo is None:
        return "No SLOs in the matrix: every completed request counts (goodput is throughput)."
    bounds = ", ".join(
        f"{name.removesuffix('_ms').upper()} ≤ {value:g} ms" for name, value in slo.bounds().items()
    )
    return f"SLOs: {bounds}; a rate passes when at least {slo.attainment:.0%} of its requests meet them."


def _cis(frame: pd.DataFrame, columns: tuple[str, str, str], spec: str = ".1f") -> list[str]:
    """Each row's value with its interval, from the (value, low, high) columns."""
    mid, lo, hi = (frame[c] for c in columns)
    return [fmt_ci(m, a, b, spec) for m, a, b in zip(mid, lo, hi, strict=True)]


def _goodput_table(per_arm: pd.DataFrame) -> pd.DataFrame:
    phases = per_arm["phase"].nunique() > 1 or per_arm["workload"].nunique() > 1
    ratios = _cis(per_arm, ("ratio", "ratio_lo", "ratio_hi"), ".2f")
    return pd.DataFrame({
        **({"workload / phase": per_arm["workload"] + " / " + per_arm["phase"]} if phases else {}),
        "arm": per_arm["arm"],
        "rate req/s": [fmt(v, "g") for v in per_arm["rate"]],
        "achieved req/s": [fmt(v, ".2f") for v in per_arm["achieved_rate"]],
        "met SLOs": [f"{v:.0%}" for v in per_arm["attainment"]],
        "goodput req/s": _cis(per_arm, ("goodput_req_s", "goodput_lo", "goodput_hi"), ".2f"),
        "goodput tok/s": _cis(per_arm, ("goodput_tok_s", "goodput_tok_lo", "goodput_tok_hi")),
        "× baseline": [v if v == "baseline" else f"{r} {v}" if r != "—" else "— (no good request)"
                       for r, v in zip(ratios, per_arm["verdict"], strict=True)],
    })  # fmt: skip


def _sweep_table(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "workload": table["workload"], "arm": table["arm"],
        "rate req/s": [fmt(v, "g") for v in table["rate"]],
        "median e2e ms": [fmt(v, ".0f") for v in table["e2e_ms"]],
        "e2e speedup": _cis(table, ("e2e_speedup", "e2e_lo", "e2e_hi"), ".2f"),
        "verdict": table["e2e_verdict"], "met SLOs": [f"{v:.0%}" for v in table["attainment"]],
    })  # fmt: skip


def _summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "workload": summary["workload"], "arm": summary["arm"],
        "highest rate meeting the SLOs": [fmt(v, "g") if pd.notna(v) else "none" for v in
                                          summary["max_rate_meeting_slo"]],
        "speculation": [s or "—" for s in summary["speculation"]],
    })  # fmt: skip


def goodput_blocks(found: Goodput, baseline: str, confidence: float) -> list[Block]:
    """The section, or nothing when the run set no SLOs and sent nothing open loop; its intervals
    are at the run's ``confidence`` (the matrix's alpha, or an adaptive run's nominal level)."""
    level = level_label(confidence)
    per_arm, table, summary, slo = found
    if per_arm.empty:
        return []
    blocks: list[Block] = [
        Heading("Goodput and load"),
        Para(_slo_words(slo)),
        Para(DEFINITION.format(base=baseline, level=level)),
        Table(_goodput_table(per_arm)),
    ]
    if not summary.empty:
        blocks += [
            Heading("Rate sweep", 3),
            Table(
                _summary_table(summary),
                "per arm: the load it carries within the SLOs, and where speculation pays",
            ),
            Para(
                "Speculation pays at a rate when the arm's e2e latency, paired by prompt within launch "
                f"pairs, is shown lower than {baseline}'s there (verdict faster); the crossover in load "
                "is the first rate where it is not."
            ),
            Table(_sweep_table(table), f"per rate: e2e speedup = {baseline} e2e / arm e2e ({level} CI)"),
        ]
    return blocks
