"""ACCEPTANCE_ARTEFACT on llama.cpp, which streams one token per chunk: the verification passes
show as bursts (a pass's accepted tokens + 1 back to back), so the stream confirms a 100 % when it
shows as many bursts as the counters imply (output − accepted), and contradicts it when it shows
more. Regression for the first GPU run (NVIDIA H200, llama.cpp CUDA): ngram-mod on prompts whose
answer repeats verbatim accepted every drafted token — genuine, yet always a warning.

The runs are SYNTHETIC (tests/support/synth.py, written through the schema) with the spec arm's
chunks rewritten into the stream under test; one request's gaps are a real H200 request's."""

from __future__ import annotations

import json
from pathlib import Path

from specbench import analysis
from specbench.analysis.evidence.passes import request_passes
from specbench.analysis.findings.model import Finding
from specbench.engines import read_record
from tests.support.records import read_lines, write_cells, write_records
from tests.support.synth import Arm, Plan, make_run, spec

TOKENS = 128  # synth: 115 drafted (0.9 × 128), all accepted: 13 bursts implied (128 − 115)
BURSTS = [11] * 11 + [6]  # tokens of each pass after the prefill token: accepted + 1, 127 in all
PASS_NS = 30_000_000  # a target pass
READ_NS = 20_000  # tokens of one pass, read back to back


def _bursts(rec: dict, apart_ns: int = READ_NS, sizes: list[int] = BURSTS) -> None:  # type: ignore[type-arg]
    """The request's token chunks as llama.cpp sends passes of ``sizes`` tokens each."""
    _role, *tokens, finish = rec["chunks"]
    t = tokens[0][0]
    stamps = [t]
    for size in sizes:
        t += PASS_NS
        stamps += [t + i * apart_ns for i in range(size)]
        t = stamps[-1]
    for row, stamp in zip(tokens, stamps, strict=True):
        row[0] = stamp
    finish[0] = stamps[-1] + 1000
    rec["t_end_ns"] = finish[0] + 500_000


def _run(root: Path, rewrite: str = "", lagging: bool = False) -> list[Finding]:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45, acceptance=1.0)}, repeats=3)
    run = make_run(root, plan)
    lines = read_lines(run / "records.jsonl")
    for rec in lines:
        if rec["arm"] == "fast" and not rec.get("warmup") and rec["chunks"]:
            if rewrite == "bursts":
                _bursts(rec)
            elif rewrite == "single":  # a target pass per token
                _bursts(rec, sizes=[1] * (TOKENS - 1))
            elif rewrite == "bunched":  # the client read every chunk at once
                _bursts(rec, apart_ns=0)
                for row in rec["chunks"]:
                    row[0] = rec["chunks"][0][0] + 1000
    write_records(run / "records.jsonl", lines)
    if lagging:
        cells = read_lines(run / "cells.jsonl")
        for cell in cells:
            if cell["arm"] == "fast":
                cell["client_lag"] = {"period_ms": 10.0, "n": 50, "p99_ms": 60.0, "max_ms": 80.0}
        write_cells(run / "cells.jsonl", cells)
    found = analysis.judge(analysis.load_run(run))
    return [f for f in found if f.code == "ACCEPTANCE_ARTEFACT" and f.arms == ("fast",)]


def test_bursts_of_accepted_plus_one_confirm_a_genuine_100_percent(tmp_path: Path) -> None:
    (found,) = _run(tmp_path / "r", "bursts")
    assert found.severity == "info", found.evidence
    assert "the stream confirms it: the stream shows 468 passes for 4608 tokens over 36" in found.evidence
    assert "the counters imply 468" in found.evidence  # 36 requests × 13


def test_one_token_per_pass_contradicts_counters_that_say_100_percent(tmp_path: Path) -> None:
    """The over-counting artefact: every drafted token counted accepted, yet the stream shows a
    target pass per token."""
    (found,) = _run(tmp_path / "r", "single")
    assert found.severity == "warning"
    assert "the stream contradicts the counters: the stream shows 4608 passes" in found.evidence
    assert "the counters imply 468" in found.evidence


def test_a_client_that_read_every_chunk_at_once_cannot_tell(tmp_path: Path) -> None:
    (found,) = _run(tmp_path / "r", "bunched")
    assert found.severity == "warning"
    told = "the stream cannot tell: 0 drafting request(s) with a timed stream, 36 reached the client bunched"
    assert told in found.evidence


def test_a_client_that_fell_behind_cannot_confirm_even_well_shaped_bursts(tmp_path: Path) -> None:
    (found,) = _run(tmp_path / "r", "bursts", lagging=True)
    assert found.severity == "warning" and "the stream cannot tell" in found.evidence
    assert "CLIENT_BEHIND" in found.evidence


# A real request's gaps between token chunks in µs (NVIDIA H200, llama.cpp CUDA, lab dense target,
# ngram-mod n-match 8 / n-max 16, coding-11, repeat 0): 128 tokens, 117 of 117 drafts accepted. A
# pass's tokens were read up to 0.134 ms apart, past the 0.1 ms that splits read windows; passes
# were 1.65–8.74 ms apart. 11 bursts: the prefill token, then 10 passes.
REAL_H200_GAPS_US = [
    5670, 0, 123, 0, 0, 39, 52, 38, 38, 39, 38, 53, 39, 40, 38, 37, 36, 7901, 93, 0, 60, 0, 32, 28,
    32, 56, 0, 27, 31, 30, 35, 30, 30, 31, 1652, 45, 27, 24, 26, 23, 25, 29, 28, 27, 25, 22, 22, 22,
    23, 22, 22, 1885, 0, 0, 0, 0, 0, 0, 0, 134, 0, 0, 0, 0, 0, 45, 0, 22, 1859, 69, 0, 29, 26, 61, 0,
    28, 30, 26, 27, 28, 26, 40, 28, 29, 27, 1664, 89, 0, 0, 28, 29, 30, 27, 45, 29, 28, 31, 28, 29,
    28, 28, 28, 1789, 0, 0, 109, 0, 0, 0, 30, 29, 30, 29, 29, 28, 28, 27, 28, 30, 8744, 0, 0, 88, 0,
    0, 2009, 3747,
]  # fmt: skip


def test_a_real_h200_request_shows_as_many_passes_as_its_counters_imply() -> None:
    t, stamps = 12_000_000, []
    for gap in [0, *REAL_H200_GAPS_US]:
        t += gap * 1000
        stamps.append(t)
    rows = [[ns, "x", None, None, None, i + 1] for i, ns in enumerate(stamps)]
    rec = json.loads(json.dumps({"arm": "ngram-mod", "chunks": rows}))
    rec |= {"usage": {"completion_tokens": 128}, "timings": {"draft_n": 117, "draft_n_accepted": 117}}
    assert request_passes(read_record(rec)) == (11, 11)
