"""Bunched streams have no client decode rate (issue 15 audit, item 1).

The records here are FAKES in the shape of real ones: a CPU vLLM without per-request metrics
read on a busy box (the audit's /tmp runs), which no engine reproduces on demand. Their chunk
rows are ``[t_ns, content, reasoning, tool_calls, finish_reason]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import load_run, metrics
from specbench.analysis.evidence.noise import unstable_arms
from specbench.analysis.findings import measurement, stability
from specbench.analysis.findings.client import client_lag_findings
from specbench.analysis.findings.judge import judge
from specbench.engines import read_record
from tests.support.records import write_cells
from tests.support.synth import Arm, Plan, make_run, spec

MS = 1_000_000


def record(times_ms: list[float], tokens: int, prompt_id: str = "p", repeat: int = 0) -> dict[str, Any]:
    """FAKE: a record with one token chunk at each time and no server timing (vLLM, SGLang)."""
    chunks = [[int(t * MS), "ab", None, None, None] for t in times_ms]
    return {
        "arm": "ngram",
        "workload": "w",
        "prompt_id": prompt_id,
        "repeat": repeat,
        "seq": repeat,
        "error": None,
        "warmup": False,
        "chunks": chunks,
        "t_end_ns": chunks[-1][0],
        "usage": {"completion_tokens": tokens, "prompt_tokens": 40},
    }


def late_first_read() -> dict[str, Any]:
    """The real vLLM n-gram request of the audit: 23 of 34 chunks in the read that stamped its
    first token at 59.9 ms, then one 52 µs later, then one every ~2.3 ms: "5279 tok/s", where its
    repeats read 1693 and 2226."""
    times = [59.9] * 23 + [59.952] + [59.952 + 2.3 * i for i in range(1, 11)]
    return record(times, 128)


def whole_stream_in_a_few_ms() -> dict[str, Any]:
    """A first token at 200 ms and the other 127 within 3 ms: "42 333 tok/s", 24 µs a token, over
    the 10 µs-a-token rule that caught only a stream read all at once."""
    return record([200.0, *np.linspace(200.1, 203.0, 127).tolist()], 128)


def test_a_late_first_read_holding_most_of_the_stream_has_no_client_rate() -> None:
    rec = late_first_read()
    assert 1000 / metrics.tpot_ms(read_record(rec)) > 5000  # what the old summary reported
    assert metrics.bunched(read_record(rec)) == 1.0 and np.isnan(metrics.decode_tok_s(read_record(rec)))
    (found,) = measurement.untimed_decode(metrics.frame([rec]), ["ngram"])
    assert found.code == "UNTIMED_DECODE" and "1 of 1 requests reached the client bunched" in found.evidence


def test_a_whole_stream_within_a_sliver_of_its_ttft_has_no_client_rate() -> None:
    rec = whole_stream_in_a_few_ms()
    assert 1000 / metrics.tpot_ms(read_record(rec)) > 40_000
    assert metrics.bunched(read_record(rec)) == 1.0 and np.isnan(
        metrics.client_decode_tok_s(read_record(rec))
    )


def test_on_time_streams_keep_their_client_rate() -> None:
    # A plain stream, one chunk every 1.3 ms after a 10 ms TTFT.
    steady = record([10.0 + 1.3 * i for i in range(128)], 128)
    assert metrics.bunched(read_record(steady)) == 0.0
    assert metrics.client_decode_tok_s(read_record(steady)) == 1000 / 1.3
    # llama.cpp n-gram: a token, one 136 ms verification round, its 11 tokens sent a chunk each
    # within 0.5 ms — the burst comes after a timed wait, so the window is real (80.8 tok/s).
    round_ = record([174.9, *np.linspace(311.0, 311.5, 11).tolist()], 12)
    assert metrics.bunched(read_record(round_)) == 0.0
    assert abs(metrics.client_decode_tok_s(read_record(round_)) - 11 / 0.1366) < 1.0


def cell_frame(bunched_speed: bool) -> pd.DataFrame:
    """One prompt × twelve repeats at ~700 tok/s; with ``bunched_speed`` one repeat is bunched."""
    recs = [record([10.0 + (1.4 + 0.01 * r) * i for i in range(128)], 128, "p0", r) for r in range(12)]
    if bunched_speed:
        recs[1] = {**late_first_read(), "prompt_id": "p0", "repeat": 1, "seq": 1}
    return metrics.frame(recs)


def test_a_bunched_request_drives_no_severe_instability() -> None:
    # Counted at 5279 tok/s, the one bunched repeat made the arm's CV an error.
    df = cell_frame(True)
    assert not [w for w in stability.stability_warnings(df) if w.code == "UNSTABLE"]
    assert unstable_arms(df) == set()


def test_unstable_names_the_clients_lag_when_client_behind_fires_on_the_arm() -> None:
    df = cell_frame(False)
    df.loc[df["repeat"] % 2 == 1, "decode_tok_s"] *= 3  # repeats that disagree wildly
    cells = [{"arm": "ngram", "repeat": 2, "client_lag": {"p99_ms": 40.0, "max_ms": 60.0}}]
    (lag,) = client_lag_findings(cells, df)
    assert lag.code == "CLIENT_BEHIND"
    (plain,) = [w for w in stability.stability_warnings(df) if w.code == "UNSTABLE"]
    assert "machine was likely busy" in plain.message
    (named,) = [w for w in stability.stability_warnings(df, client_behind={"ngram"}) if w.code == "UNSTABLE"]
    assert "CLIENT_BEHIND" in named.message and "machine was likely busy" not in named.message
    mild = cell_frame(False)
    mild.loc[mild["repeat"] % 2 == 1, "decode_tok_s"] *= 1.3  # a CV near 14 %: a warning, not an error
    (warn,) = [w for w in stability.stability_warnings(mild, client_behind={"ngram"}) if w.code == "UNSTABLE"]
    assert not warn.severe and "The client's event loop fell behind" in warn.message


def test_the_judge_passes_client_behind_on_to_unstable(tmp_path: Path) -> None:
    # A synthetic run (tests/support/synth.py) with noisy repeats and a late client loop on the baseline.
    run = make_run(tmp_path / "run", Plan({"baseline": Arm(), "fast": spec(60)}, noise=0.5))
    cells = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    for cell in cells:
        if cell["arm"] == "baseline":
            cell["client_lag"] = {"n": 100, "p50_ms": 1.0, "p99_ms": 500.0, "max_ms": 600.0}
    write_cells(run / "cells.jsonl", cells)
    found = judge(load_run(run))
    assert [f.arms for f in found if f.code == "CLIENT_BEHIND"] == [("baseline",)]
    unstable = {f.arms[0]: f.evidence for f in found if f.code == "UNSTABLE"}
    assert "CLIENT_BEHIND" in unstable["baseline"] and "CLIENT_BEHIND" not in unstable["fast"]
