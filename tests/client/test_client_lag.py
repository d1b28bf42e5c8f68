"""The client's own lag: measured on the loop, and a CLIENT_BEHIND finding only when it is large
next to the arm's time per output token."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pandas as pd

from specbench.analysis.findings.client import client_lag_findings
from specbench.client.looplag import LoopLag


def test_a_blocked_loop_shows_as_lag() -> None:
    async def go() -> dict[str, Any]:
        probe = LoopLag()
        probe.start()
        await asyncio.sleep(0.03)
        time.sleep(0.08)  # what a blocking fsync on the loop does to every open stream
        await asyncio.sleep(0.03)
        return await probe.stop()

    lag = asyncio.run(go())
    assert lag["n"] >= 2 and lag["max_ms"] >= 60.0  # the block, less at most one 10 ms period


def test_client_behind_only_where_lag_is_large_next_to_itl() -> None:
    cells = [
        {"arm": "base", "repeat": 0, "client_lag": {"p99_ms": 1.9, "max_ms": 3.0}},  # under the floor
        {"arm": "spec", "repeat": 0, "client_lag": {"p99_ms": 0.5, "max_ms": 1.0}},
        {"arm": "spec", "repeat": 1, "client_lag": {"p99_ms": 6.0, "max_ms": 30.0}},
        {"arm": "slow", "repeat": 0, "client_lag": {"p99_ms": 6.0, "max_ms": 9.0}},
        {"arm": "old", "repeat": 0},  # a cell recorded before the probe existed
    ]
    df = pd.DataFrame({"arm": ["base", "spec", "slow", "old"], "tpot_ms": [2.0, 2.0, 50.0, 2.0]})
    found = client_lag_findings(cells, df)
    assert [(f.code, f.arms) for f in found] == [("CLIENT_BEHIND", ("spec",))]
    assert "6.00 ms" in found[0].evidence and "repeat 1" in found[0].evidence


def test_client_behind_names_requests_the_late_loop_read_at_once() -> None:
    """Regression (#15 audit): a vLLM baseline request whose 129 chunks the loop read at once (p99
    lag 174 ms) had no decode rate and left the comparison, and no finding said so."""
    cells = [{"arm": "base", "repeat": 2, "client_lag": {"p99_ms": 173.7, "max_ms": 187.2}}]
    df = pd.DataFrame(
        {
            "arm": ["base"] * 3,
            "tpot_ms": [1.3, 0.0, 1.2],
            "bunched": [0.0, 1.0, 0.0],
            "decode_tok_s": [770.0, float("nan"), 825.0],
        }
    )
    (found,) = client_lag_findings(cells, df)
    assert "1 of 3 requests arrived bunched and have no decode rate" in found.evidence
    # No server timing (vLLM): the decode rate is the client's too, and the finding says so.
    assert "TTFT, ITL and decode tok/s (the server times no request itself)" in found.evidence
    timed = df.assign(server_decode_tok_s=[770.0, 800.0, 825.0])
    assert "so TTFT/ITL partly measure" in client_lag_findings(cells, timed)[0].evidence


def test_client_behind_says_how_the_late_loop_distorted_the_stamps_it_used() -> None:
    """With the kernel's receive times a read is timed right even when the loop finds it late; what
    a late loop still does is let several chunks pile up in one read, which share one stamp."""
    df = pd.DataFrame({"arm": ["spec"], "tpot_ms": [2.0]})
    lag = {"p99_ms": 6.0, "max_ms": 30.0}
    kernel = [{"arm": "spec", "repeat": 0, "client_lag": {**lag, "stamps": "kernel"}}]
    poll = [{"arm": "spec", "repeat": 0, "client_lag": {**lag, "stamps": "poll"}}]
    (by_kernel,) = client_lag_findings(kernel, df)
    (by_poll,) = client_lag_findings(poll, df)
    assert "took several chunks at once" in by_kernel.evidence and "were late" not in by_kernel.evidence
    assert "chunk stamps were late and bunched" in by_poll.evidence


def test_with_kernel_stamps_a_lag_under_one_tpot_is_no_finding() -> None:
    """Regression (demo, 2026-11-27): a 3.4 ms p99 lag against a 5.8 ms TPOT read "reads took
    several chunks at once", which a read 3.4 ms late cannot do when chunks are 5.8 ms apart."""
    df = pd.DataFrame({"arm": ["ngram"], "tpot_ms": [5.82]})
    lag = {"p99_ms": 3.38, "max_ms": 5.4}
    assert not client_lag_findings(
        [{"arm": "ngram", "repeat": 2, "client_lag": {**lag, "stamps": "kernel"}}], df
    )
    assert client_lag_findings([{"arm": "ngram", "repeat": 2, "client_lag": {**lag, "stamps": "poll"}}], df)
    later = {"p99_ms": 6.5, "max_ms": 9.0, "stamps": "kernel"}
    assert client_lag_findings([{"arm": "ngram", "repeat": 2, "client_lag": later}], df)
