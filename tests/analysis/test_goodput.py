"""Goodput against SLOs, its launch-level interval, the rate-sweep builder and the load
crossover, on records built by hand (the engine run is tests/analysis/test_goodput_engine.py); the
matrix's SLO and rate fields and their one-line errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specbench.analysis import RunData
from specbench.analysis.metrics import frame
from specbench.analysis.tables import goodput as gp
from specbench.engines import read_record
from specbench.errors import ConfigError
from specbench.matrix.config import Matrix, SLOSpec
from specbench.matrix.load import load_matrix
from specbench.store.record import Record
from specbench.workloads.suites import build_requests

RATES = (1.0, 2.0, 4.0)


def rec(arm: str, repeat: int, rate: float, i: int, e2e_ms: float, **kw: Any) -> Record:
    """A completed request: first token at ``ttft_ms``, ``tokens`` output tokens, ending at ``e2e_ms``."""
    ttft, tokens = kw.get("ttft_ms", 50.0), kw.get("tokens", 11)
    times = np.linspace(ttft, e2e_ms, tokens) * 1e6
    return read_record({
        "arm": arm, "repeat": repeat, "workload": "rate-sweep", "phase": f"r{rate:g}",
        "prompt_id": f"p{i}@r{rate:g}", "category": "c", "warmup": False, "seq": hash((arm, repeat, rate, i)),
        "wall_start": 1000.0 * repeat + 100.0 * rate + i / rate, "t_end_ns": int(e2e_ms * 1e6),
        "chunks": [[int(t), "w ", None, None, None] for t in times], "usage": {"completion_tokens": tokens},
        "error": kw.get("error"), "arrival": {"rate": rate},
    })  # fmt: skip


def sweep_records(spec_e2e: dict[float, float], n: int = 6) -> list[Record]:
    """Baseline e2e 400 ms × rate; the spec arm's ``spec_e2e[rate]`` times that; 3 launches."""
    rng = np.random.default_rng(0)
    out = []
    for repeat in range(3):
        for rate in RATES:
            for i in range(n):
                base = 400.0 * rate * (1 + 0.02 * rng.standard_normal())
                out.append(rec("baseline", repeat, rate, i, base))
                out.append(
                    rec("spec", repeat, rate, i, base * spec_e2e[rate] * (1 + 0.01 * rng.standard_normal()))
                )
    return out


def run_of(records: list[Record], slo: dict[str, float] | None) -> RunData:
    matrix = {"baseline": "baseline", "arms": {"baseline": [], "spec": []}, "slo": slo}
    return RunData(manifest={"matrix": matrix}, records=records, cells=[], df=frame(records))


def test_meets_every_bound_at_equality_and_fails_errors() -> None:
    slo = SLOSpec(ttft_ms=50.0, tpot_ms=10.0, e2e_ms=150.0)
    assert gp.meets(rec("a", 0, 1.0, 0, 150.0), slo)  # TTFT 50, TPOT (150 − 50) / 10 = 10: on the bounds
    assert not gp.meets(rec("a", 0, 1.0, 0, 151.0), slo)
    assert not gp.meets(rec("a", 0, 1.0, 0, 100.0, ttft_ms=60.0), slo)
    assert gp.meets(rec("a", 0, 1.0, 0, 60.0, tokens=1), SLOSpec(tpot_ms=1.0))  # no TPOT: passes, as vLLM
    failed = replace(rec("a", 0, 1.0, 0, 100.0), error={"type": "http"})
    assert (
        not gp.meets(failed, slo) and not gp.meets(failed, None) and gp.meets(rec("a", 0, 1.0, 0, 9e9), None)
    )


def test_goodput_counts_good_requests_over_the_phase_duration() -> None:
    good = [rec("a", 0, 2.0, i, 100.0) for i in range(4)]  # sent at 0, 0.5, 1, 1.5 s; last ends 1.6 s
    bad = [rec("a", 0, 2.0, 4, 900.0)]  # sent at 2 s, ends 2.9 s: misses e2e ≤ 500
    (row,) = gp.launch_goodput(good + bad, SLOSpec(e2e_ms=500.0)).to_dict("records")
    assert row["requests"] == 5 and row["good"] == 4 and row["attainment"] == pytest.approx(0.8)
    assert row["duration_s"] == pytest.approx(2.9) and row["rate"] == 2.0
    assert row["goodput_req_s"] == pytest.approx(4 / 2.9) and row["goodput_tok_s"] == pytest.approx(44 / 2.9)
    assert row["achieved_rate"] == pytest.approx(5 / 2.9)


def test_goodput_interval_and_ratio_are_launch_level() -> None:
    run = run_of(sweep_records({1.0: 0.7, 2.0: 0.7, 4.0: 1.3}), {"e2e_ms": 1000.0})
    per_arm, table, summary, _ = gp.goodput_tables(run)
    at4 = per_arm[(per_arm["phase"] == "r4")].set_index("arm")
    assert (at4["goodput_req_s"] == 0).all() and (at4["attainment"] == 0).all()  # 1600 and 2080 ms > 1000
    at1 = per_arm[(per_arm["phase"] == "r1")].set_index("arm")
    assert (at1["launches"] == 3).all() and (at1["attainment"] == 1).all()
    lo, mid, hi = at1.loc["spec", ["goodput_lo", "goodput_req_s", "goodput_hi"]]
    assert lo < mid < hi  # a t interval over the three launch values
    assert at1.loc["baseline", "verdict"] == "baseline" and at1.loc["spec", "ratio"] == pytest.approx(
        1, abs=0.1
    )
    assert at4.loc["spec", "verdict"] == "undetermined"  # no good request: no log-ratio
    rows = summary.set_index("arm")
    assert (
        rows.loc["baseline", "max_rate_meeting_slo"] == 2.0
        and rows.loc["spec", "max_rate_meeting_slo"] == 2.0
    )
    assert rows.loc["spec", "pays_up_to"] == 2.0
    assert rows.loc["spec", "speculation"].startswith("stops paying above 2 req/s (4 req/s: slower")
    spec_rows = table[table["arm"] == "spec"]
    assert list(spec_rows["e2e_verdict"]) == ["faster", "faster", "slower"]


def test_load_crossover_cases() -> None:
    assert gp.load_crossover([1.0, 2.0], ["faster", "faster"]) == (
        2.0,
        "pays at every rate swept (up to 2 req/s)",
    )
    pays, words = gp.load_crossover([1.0, 2.0], ["equivalent", "faster"])
    assert pays is None and words.startswith("not shown to pay at any rate swept (from 1 req/s: equivalent")
    assert gp.highest_passing_rate([1.0, 2.0, 4.0], [1.0, 0.95, 0.5], 0.9) == 2.0
    assert gp.highest_passing_rate([1.0], [0.5], 0.9) is None


def test_no_slo_and_closed_loop_gives_no_goodput_section() -> None:
    closed = [replace(rec("baseline", 0, 1.0, i, 100.0), arrival=None) for i in range(3)]
    per_arm, table, summary, _ = gp.goodput_tables(run_of(closed, None))
    assert per_arm.empty and table.empty and summary.empty


def test_rate_sweep_builds_one_open_loop_phase_per_rate() -> None:
    m = Matrix(
        model="m.gguf", workload={"suite": "rate-sweep", "rates": [4, 0.5], "prompts": 3, "scale": 0.1}
    )
    requests, _, cap = build_requests(m, Path("."))
    assert [r.phase for r in requests] == ["r0.5"] * 3 + ["r4"] * 3 and cap == 32
    assert [r.request_rate for r in requests] == [0.5] * 3 + [4.0] * 3
    assert len({r.prompt_id for r in requests}) == 6  # own ids, so own fillers per rate
    plain = Matrix(model="m.gguf", workload={"suite": "natural", "request_rate": 3, "prompts": 2})
    assert {r.request_rate for r in build_requests(plain, Path("."))[0]} == {3.0}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("slo: {ttft_ms: -5}", r"matrix.yaml:3: slo.ttft_ms: Input should be greater than 0"),
        ("slo: {}", r"matrix.yaml:3: slo: give at least one of ttft_ms, tpot_ms, e2e_ms"),
        ("slo: {ttfb_ms: 5}", r"slo.ttfb_ms: unknown field \(known: attainment, e2e_ms, tpot_ms, ttft_ms\)"),
        ("slo: {e2e_ms: 100, attainment: 1.5}", r"slo.attainment: Input should be less than or equal to 1"),
        ("workload: {suite: rate-sweep, rates: [1, 0]}", r"workload.rates: needs at least one request rate"),
    ],
)
def test_slo_and_rate_errors_name_the_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(f"model: m.gguf\narms: {{baseline: []}}\n{text}\n")
    with pytest.raises(ConfigError, match=error) as err:
        load_matrix(path)
    assert "\n" not in str(err.value)


def test_rate_sweep_plot_only_for_a_sweep() -> None:
    from specbench.analysis import analyse
    from specbench.report.plots import goodput_vs_rate

    run = run_of(sweep_records({1.0: 0.7, 2.0: 0.7, 4.0: 1.3}), {"e2e_ms": 1000.0})
    fig = goodput_vs_rate(analyse(run))
    assert fig is not None and [len(ax.lines) >= 2 for ax in fig.axes] == [True, True]
    closed = [replace(rec("baseline", 0, 1.0, i, 100.0), arrival=None) for i in range(3)]
    assert goodput_vs_rate(analyse(run_of(closed, None))) is None


def test_findings_json_carries_goodput_and_the_rate_sweep() -> None:
    """A reader of findings.json (a script, a dashboard) gets what the report's goodput section
    shows: the SLOs, goodput per arm with its interval, the sweep rows and its summary."""
    import json

    from specbench.analysis import analyse
    from specbench.report.render import findings_json

    run = run_of(sweep_records({1.0: 0.7, 2.0: 0.7, 4.0: 1.3}), {"e2e_ms": 1000.0})
    out = json.loads(json.dumps(findings_json(analyse(run)), allow_nan=False))["goodput"]
    assert out["slo"]["e2e_ms"] == 1000.0
    assert {r["arm"] for r in out["per_arm"]} == {"baseline", "spec"}
    assert sorted({r["rate"] for r in out["rate_sweep"]}) == sorted(RATES)
    assert {r["arm"] for r in out["rate_sweep_summary"]} >= {"spec"}
    closed = [replace(rec("baseline", 0, 1.0, i, 100.0), arrival=None) for i in range(3)]
    empty = findings_json(analyse(run_of(closed, None)))["goodput"]
    assert empty == {"slo": None, "per_arm": [], "rate_sweep": [], "rate_sweep_summary": []}
