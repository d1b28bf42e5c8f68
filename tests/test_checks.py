"""Checks on synthetic data built to trigger (or not trigger) each finding."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from specbench import checks
from specbench.engines.sglang import SglangEngine
from specbench.engines.vllm import VllmEngine

DRAFT = ["-md", "d.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]


def frame(arm: str, drafted: list[float], accepted: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"arm": arm, "draft_n": drafted, "draft_accepted": accepted})


def test_flags_pair_with_values_including_negative_numbers() -> None:
    assert checks.split_flags(["-c", "4096", "--metrics", "-ngl", "-1", "--no-mmap"]) == [
        ("-c", "4096"),
        ("--metrics", None),
        ("-ngl", "-1"),
        ("--no-mmap", None),
    ]


def test_what_counts_as_speculating() -> None:
    assert checks.speculates(DRAFT)
    assert checks.speculates(["--spec-type", "ngram-mod"])
    assert not checks.speculates(["--spec-type", "none"])
    assert not checks.speculates(["-c", "4096"])


def test_silent_fallback_from_idle_drafting_slots_and_logs() -> None:
    df = frame("draft8", [0.0] * 10, [0.0] * 10)
    cells = [
        {
            "arm": "draft8",
            "server": {"slots_speculative": [False]},
            "log_lines": ["srv load_model: failed to initialize speculative decoding context: x"],
        }
    ]
    (found,) = checks.silent_fallback(
        "draft8", DRAFT, df, cells, ["failed to initialize speculative decoding"]
    )
    assert found.code == "SILENT_FALLBACK" and found.severity == "error"
    assert "no drafting on 100% of 10 requests" in found.evidence and "/slots" in found.evidence


def test_no_fallback_when_drafting_or_not_configured() -> None:
    busy = frame("draft8", [40.0] * 10, [30.0] * 10)
    assert checks.silent_fallback("draft8", DRAFT, busy, [], []) == []
    assert checks.silent_fallback("baseline", [], frame("baseline", [0.0] * 10, [0.0] * 10), [], []) == []


def test_unknown_draft_counts_are_not_zero_and_the_engine_decides_what_speculates() -> None:
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    unknown = frame("ngram", [float("nan")] * 10, [float("nan")] * 10)  # no per-request metrics
    assert checks.silent_fallback("ngram", spec, unknown, [], [], VllmEngine()) == []
    cells = [{"arm": "ngram", "server": {"spec_metrics_present": False}, "log_lines": ["x failed"]}]
    assert checks.silent_fallback("ngram", spec, unknown, cells, ["failed"]) == []  # llama.cpp: no spec flag
    (found,) = checks.silent_fallback("ngram", spec, unknown, cells, [], VllmEngine())
    assert "no vllm:spec_decode counters" in found.evidence and "no drafting" not in found.evidence


@pytest.mark.parametrize(
    ("speculative", "flagged"),
    [({"speculative_algorithm": None}, True), ({"speculative_algorithm": "EAGLE3"}, False), ({}, False)],
)
def test_sglang_without_an_algorithm_is_a_fallback(speculative: dict[str, Any], flagged: bool) -> None:
    cells = [{"arm": "eagle3", "server": {"speculative": speculative}}]
    df = frame("eagle3", [float("nan")] * 3, [float("nan")] * 3)
    found = checks.silent_fallback(
        "eagle3", ["--speculative-algorithm", "EAGLE3"], df, cells, [], SglangEngine()
    )
    assert bool(found) == flagged


def test_hundred_percent_acceptance_is_an_artefact() -> None:
    df = frame("a", [10.0, 12.0, 8.0, 0.0], [10.0, 12.0, 8.0, 0.0])
    (found,) = checks.acceptance_artefact("a", df, {})
    assert found.code == "ACCEPTANCE_ARTEFACT" and "all 3 drafting requests" in found.evidence
    assert checks.acceptance_artefact("a", frame("a", [10.0] * 3, [7.0, 10.0, 9.0]), {}) == []


def test_acceptance_sources_are_compared() -> None:
    df = frame("a", [100.0, 100.0], [50.0, 60.0])
    cells = [
        {
            "arm": "a",
            "metrics_before": {"spec": {"drafts": 0, "draft_tokens": 0, "accepted": 0}},
            "metrics_after": {"spec": {"drafts": 50, "draft_tokens": 200, "accepted": 180}},
            "log_lines": [
                "slot print_timing: id  0 | task 3 | "
                "draft acceptance = 0.55000 (  110 accepted /   200 generated), mean len =  3.20"
            ],
        }
    ]
    sources = checks.acceptance_sources("a", df, cells)
    assert sources["timings"]["rate"] == 0.55 and sources["log"]["rate"] == 0.55
    assert sources["metrics"]["rate"] == 0.9 and sources["metrics"]["mean_accepted_length"] == pytest.approx(
        4.6
    )
    (found,) = checks.acceptance_artefact("a", df, sources)
    assert "sources disagree" in found.evidence and "metrics 0.900" in found.evidence


def test_confound_names_the_differing_flags() -> None:
    arms = {
        "baseline": ["-c", "4096", "-np", "1"],
        "draft": ["-c", "4096", "-np", "1", *DRAFT],
        "mtp": ["-c", "8192", "-np", "1", "--spec-type", "draft-mtp"],
    }
    (found,) = checks.confounds(arms, "baseline")
    assert found.arms == ("baseline", "mtp") and "-c" in found.evidence


def texts(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"arm": a, "prompt_id": p, "repeat": 0, "text": t, "temperature": 0.0, "category": "c"}
            for a, p, t in rows
        ]
    )


def test_output_equivalence_and_drift() -> None:
    df = texts(
        [
            ("base", "p1", "hello world"),
            ("spec", "p1", "hello world"),
            ("base", "p2", "abcdef"),
            ("spec", "p2", "abcxef"),
        ]
    )
    eq = checks.output_equivalence(df, "spec", "base")
    assert (eq.pairs, eq.exact_match_rate, eq.mean_levenshtein, eq.median_first_divergence) == (
        2,
        0.5,
        0.5,
        3.0,
    )
    (found,) = checks.output_drift(df, ["base", "spec"], "base")
    assert found.code == "OUTPUT_DRIFT" and "50% of 2" in found.evidence
    same = texts([("base", "p1", "x"), ("spec", "p1", "x")])
    assert checks.output_drift(same, ["base", "spec"], "base") == []


def call_record(arm: str, name: str, args: list[str], pid: str = "p") -> dict[str, Any]:
    chunks = [
        [1, None, None, [{"index": 0, "id": "c1", "type": "function", "function": {"name": name}}], None]
    ]
    chunks += [
        [2 + i, None, None, [{"index": 0, "function": {"arguments": a}}], None] for i, a in enumerate(args)
    ]
    return {"arm": arm, "prompt_id": pid, "repeat": 0, "warmup": False, "error": None, "chunks": chunks}


def test_tool_calls_are_reassembled_from_fragments() -> None:
    (call,) = checks.tool_calls(call_record("a", "get_weather", ['{"ci', 'ty": "Lisbon"}']))
    assert call == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    assert checks.call_signature(call) == ("get_weather", True, ("city",))


def test_toolcall_mismatch_on_name_keys_or_json() -> None:
    base = call_record("base", "get_weather", ['{"city": "Lisbon"}'])
    good = call_record("spec", "get_weather", ['{"city": "Lisbon"}'])
    assert checks.toolcall_mismatch([base, good], ["base", "spec"], "base") == []
    broken = call_record("spec", "get_weather", ['{"city": "Lis'])
    (found,) = checks.toolcall_mismatch([base, broken], ["base", "spec"], "base")
    assert found.code == "TOOLCALL_MISMATCH" and "1 with invalid JSON" in found.evidence
