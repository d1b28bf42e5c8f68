"""Stalled requests (a paused engine) are named, not read as modes or a category effect: SYNTHETIC
records with the pause written in (a real engine cannot be made to pause on demand)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specbench import analysis
from specbench.analysis.evidence import stalls
from specbench.analysis.tables import frames
from specbench.engines import read_record
from tests.support.records import write_records
from tests.support.stalls import PAUSE_NS, run_with_stalls, stall
from tests.support.synth import Arm, Plan, make_run, spec


def test_stalled_requests_are_named_and_make_no_category_split(tmp_path: Path) -> None:
    run = analysis.load_run(run_with_stalls(tmp_path / "r"))
    found = analysis.judge(run)
    (stall,) = [f for f in found if f.code == "STALLED"]
    assert stall.arms == ("fast",) and "6 of 36 requests stalled" in stall.evidence
    with_, without = (float(x) for x in re.findall(r"×([0-9.]+) with(?:out)?", stall.evidence))
    assert with_ < 1.2 < 1.4 < without  # the pauses hide most of the arm's ×1.5
    assert not [f for f in found if f.code == "BIMODAL" and "fast" in f.arms]
    assert not [s for s in frames.category_splits(run) if s.startswith("fast")]


def test_a_run_without_pauses_has_no_stall(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=4, prompts_per_category=3)
    run = analysis.load_run(make_run(tmp_path / "r", plan))
    assert not [f for f in analysis.judge(run) if f.code == "STALLED"]


# Chunk gaps of a real request (gemma3-270m, llama.cpp ngram-simple n 4 / m 16, quote-summary,
# repeat 0, on a box with load 3.4 on 2 cores): (gap before a step in ms, tokens of that step's
# accepted draft that followed 0.05 ms apart). llama.cpp streams accepted draft tokens as separate
# chunks, so most gaps are within a burst; the 270 ms gap is the first verification round of a
# 16-token draft (the same round took 134 and 141 ms in the quiet repeats 1 and 2).
REAL_NGRAM_STEPS = [
    (269.6, 11), (13.2, 0), (17.6, 0), (20.5, 0), (25.5, 0), (24.9, 0), (40.6, 0),
    (115.9, 16), (153.4, 16), (213.8, 10),
]  # fmt: skip
BURST_MS = 0.05


def _bursty_record(steps: list[tuple[float, int]]) -> dict:  # type: ignore[type-arg]
    t = 243.0  # ms to the first token
    times = [t]
    for gap, burst in steps:
        t += gap
        times.append(t)
        for _ in range(burst):
            t += BURST_MS
            times.append(t)
    chunks = [[int(ms * 1e6), "x", None, None, None, i + 1] for i, ms in enumerate(times)]
    return {"arm": "ngram-simple", "seq": 1, "warmup": False, "error": None, "chunks": chunks}


def test_a_slow_verification_round_between_bursts_is_no_stall() -> None:
    """Regression (#15 audit): the usual gap was the median chunk gap, a within-burst 0.05 ms for
    a speculative arm, so this request read as 'the engine was paused' at the 250 ms floor."""
    rec = _bursty_record(REAL_NGRAM_STEPS)
    assert len(rec["chunks"]) == 64  # the request's 64 tokens
    assert stalls.stall_ms(read_record(rec)) == 0.0


def test_a_real_pause_between_bursts_is_still_a_stall() -> None:
    rec = _bursty_record([*REAL_NGRAM_STEPS[:5], (3000.0, 0), *REAL_NGRAM_STEPS[5:]])
    assert stalls.stall_ms(read_record(rec)) == pytest.approx(3000.0)


# -- rounds are not stalls (#27) ---------------------------------------------------------------
# gemma3-270m with n-gram drafts of up to 40 tokens: each long gap (0.32–0.69 s) ended in a burst of
# exactly accepted + 1 tokens, read at once — a verification round, which the check called a pause.
ROUND_GAP_NS = 600_000_000
BURST = 41  # 40 accepted + the round's own token


def _round(rec: dict, at: int = 20, apart_ns: int = 0) -> None:  # type: ignore[type-arg]
    """A 0.6 s verification round after token chunk ``at``: its 41 tokens arrive in one read (or
    reads ``apart_ns`` apart), the rest keep their spacing after it; the server's timings cover
    the new window and the drafts."""
    rows = rec["chunks"]
    stamp = rows[at][0] + ROUND_GAP_NS
    shift = stamp + apart_ns * (BURST - 1) - rows[at + BURST][0]
    for i, row in enumerate(rows[at + 1 : at + 1 + BURST]):
        row[0] = stamp + i * apart_ns
    for row in rows[at + 1 + BURST :]:
        row[0] += shift
    _retime(rec)
    rec["timings"] |= {"draft_n": 60, "draft_n_accepted": 40}


def _retime(rec: dict) -> None:  # type: ignore[type-arg]
    """The server's decode time as it would time the stream: first to last token."""
    tokens = [r[0] for r in rec["chunks"] if r[1]]
    ms = (tokens[-1] - tokens[0]) / 1e6
    n = rec["timings"]["predicted_n"]
    rec["timings"] |= {"predicted_ms": ms, "predicted_per_second": 1000.0 * (n - 1) / ms}


def _pause(rec: dict, at: int = 20, gap_ns: int = PAUSE_NS) -> None:  # type: ignore[type-arg]
    """A ``gap_ns`` gap after token chunk ``at``, then one token at a time again."""
    for row in rec["chunks"][at + 1 :]:
        row[0] += gap_ns


def _records(root: Path) -> list[dict]:  # type: ignore[type-arg]
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "ngram": spec(45)}, repeats=4, prompts_per_category=3)
    run = make_run(root, plan)
    return [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]


def _measured(lines: list[dict], arm: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in lines if r["arm"] == arm and not r.get("warmup") and r.get("error") is None]


@pytest.mark.parametrize("apart_ns", [0, 50_000, 500_000])  # one read; reads 0.05 / 0.5 ms apart
def test_a_long_gap_ending_in_a_41_token_burst_is_a_round_not_a_stall(tmp_path: Path, apart_ns: int) -> None:
    lines = _records(tmp_path / "r")
    rec = _measured(lines, "ngram")[0]
    _round(rec, apart_ns=apart_ns)
    assert stalls.stall_ms(read_record(rec)) == 0.0
    assert stalls.arm_rounds([read_record(rec)]) == {"ngram": pytest.approx(600.0, abs=1)}


def test_rounds_stay_in_the_checks_and_a_true_pause_without_speculation_is_still_stalled(
    tmp_path: Path,
) -> None:
    lines = _records(tmp_path / "r")
    for rec in [r for r in _measured(lines, "ngram") if r["category"] == "code"]:
        _round(rec)
    for rec in [r for r in _measured(lines, "baseline") if r["category"] == "chat"][:3]:
        stall(rec)  # 1.5 s, then one token at a time: the server's time holds it
    run_dir = tmp_path / "r"
    write_records(run_dir / "records.jsonl", lines)
    run = analysis.load_run(run_dir)
    found = [f for f in analysis.judge(run) if f.code == "STALLED"]
    assert [f.arms for f in found] == [("baseline",)] and "3 of 36 requests stalled" in found[0].evidence
    kept = stalls.without_stalls(run.df, run.records)
    assert (kept["arm"] == "ngram").sum() == (run.df["arm"] == "ngram").sum() == 36  # none dropped


def test_a_rejected_draft_round_is_no_stall_but_a_request_that_drafted_nothing_can_be(
    tmp_path: Path,
) -> None:
    """A rejected draft costs a round and yields one token: a single-token gap no longer than the
    arm's rounds is one where the request drafted — not where the server says it drafted nothing."""
    lines = _records(tmp_path / "r")
    shown, rejected, undrafted, paused = _measured(lines, "ngram")[:4]
    _round(shown)
    for rec in (rejected, undrafted):
        _pause(rec, gap_ns=500_000_000)
        _retime(rec)
    undrafted["timings"] |= {"draft_n": 0, "draft_n_accepted": 0}
    _pause(paused, gap_ns=3 * ROUND_GAP_NS)
    _retime(paused)
    found = stalls.stalled(
        [read_record(shown), read_record(rejected), read_record(undrafted), read_record(paused)]
    )
    assert set(found) == {("ngram", undrafted["seq"]), ("ngram", paused["seq"])}
    assert found[("ngram", paused["seq"])] == pytest.approx(1800.0, abs=30)


def test_a_gap_the_servers_own_timing_leaves_out_is_no_engine_pause(tmp_path: Path) -> None:
    """The server timed the decode without the gap: the engine was not paused, the delay was on
    the way to the client, so "the engine was paused" would be false."""
    lines = _records(tmp_path / "r")
    rec = _measured(lines, "baseline")[0]
    _pause(rec)  # timings untouched: the server decoded at its usual rate throughout
    assert stalls.stall_ms(read_record(rec)) == 0.0
    _retime(rec)  # the same gap inside the server's decode time: a pause
    assert stalls.stall_ms(read_record(rec)) == pytest.approx(PAUSE_NS / 1e6, rel=0.05)


def test_a_silent_server_of_an_arm_that_does_not_speculate_gets_no_round_excuse(tmp_path: Path) -> None:
    """Where the server does not say whether a request drafted (a vLLM baseline), a single-token
    gap as long as a round is excused only on an arm configured to speculate."""
    lines = _records(tmp_path / "r")
    shown, gap = _measured(lines, "baseline")[:2]
    _round(shown)  # a burst on a baseline (a bunched read): its longest "round" is 0.6 s
    _pause(gap, gap_ns=850_000_000)  # ≥ 20 × the 33 ms step, ≤ 1.5 × that "round"
    for rec in (shown, gap):
        del rec["timings"]  # the server says nothing about drafting (nor times the decode)
    assert ("baseline", gap["seq"]) not in stalls.stalled(
        [read_record(shown), read_record(gap)]
    )  # not known: it may draft
    assert ("baseline", gap["seq"]) in stalls.stalled(
        [read_record(shown), read_record(gap)], speculating={"ngram"}
    )
