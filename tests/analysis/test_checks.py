"""Checks on synthetic data built to trigger (or not trigger) each finding."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from specbench.analysis.evidence.acceptance import acceptance_sources
from specbench.analysis.findings import acceptance, confound, outputs, speculation
from specbench.engines import read_record
from specbench.engines.base import split_flags
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.sglang import SglangEngine
from specbench.engines.vllm import VllmEngine

LLAMA = LlamaCppEngine()  # the checks ask the run's engine; these arms are llama.cpp's

DRAFT = ["-md", "d.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]


def frame(arm: str, drafted: list[float], accepted: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"arm": arm, "draft_n": drafted, "draft_accepted": accepted})


def test_flags_pair_with_values_including_negative_numbers() -> None:
    assert split_flags(["-c", "4096", "--metrics", "-ngl", "-1", "--no-mmap"]) == [
        ("-c", "4096"),
        ("--metrics", None),
        ("-ngl", "-1"),
        ("--no-mmap", None),
    ]


def test_what_counts_as_speculating() -> None:
    assert LLAMA.speculates(DRAFT)
    assert LLAMA.speculates(["--spec-type", "ngram-mod"])
    assert not LLAMA.speculates(["--spec-type", "none"])
    assert not LLAMA.speculates(["-c", "4096"])


def test_silent_fallback_from_idle_drafting_slots_and_logs() -> None:
    df = frame("draft8", [0.0] * 10, [0.0] * 10)
    cells = [
        {
            "arm": "draft8",
            "server": {"slots_speculative": [False]},
            "log_lines": ["srv load_model: failed to initialize speculative decoding context: x"],
        }
    ]
    (found,) = speculation.silent_fallback(
        "draft8", DRAFT, df, cells, ["failed to initialize speculative decoding"], LLAMA
    )
    assert found.code == "SILENT_FALLBACK" and found.severity == "error"
    assert "no drafting on 100% of 10 requests" in found.evidence and "/slots" in found.evidence


def test_no_fallback_when_drafting_or_not_configured() -> None:
    busy = frame("draft8", [40.0] * 10, [30.0] * 10)
    assert speculation.silent_fallback("draft8", DRAFT, busy, [], [], LLAMA) == []
    assert (
        speculation.silent_fallback("baseline", [], frame("baseline", [0.0] * 10, [0.0] * 10), [], [], LLAMA)
        == []
    )


def test_unknown_draft_counts_are_not_zero_and_the_engine_decides_what_speculates() -> None:
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    unknown = frame("ngram", [float("nan")] * 10, [float("nan")] * 10)  # no per-request metrics
    assert speculation.silent_fallback("ngram", spec, unknown, [], [], VllmEngine()) == []
    cells = [{"arm": "ngram", "server": {"spec_metrics_present": False}, "log_lines": ["x failed"]}]
    assert (
        speculation.silent_fallback("ngram", spec, unknown, cells, ["failed"], LLAMA) == []
    )  # llama.cpp: no spec flag
    (found,) = speculation.silent_fallback("ngram", spec, unknown, cells, [], VllmEngine())
    assert "no vllm:spec_decode counters" in found.evidence and "no drafting" not in found.evidence


@pytest.mark.parametrize(
    ("speculative", "flagged"),
    [({"speculative_algorithm": None}, True), ({"speculative_algorithm": "EAGLE3"}, False), ({}, False)],
)
def test_sglang_without_an_algorithm_is_a_fallback(speculative: dict[str, Any], flagged: bool) -> None:
    cells = [{"arm": "eagle3", "server": {"speculative": speculative}}]
    df = frame("eagle3", [float("nan")] * 3, [float("nan")] * 3)
    found = speculation.silent_fallback(
        "eagle3", ["--speculative-algorithm", "EAGLE3"], df, cells, [], SglangEngine()
    )
    assert bool(found) == flagged


def test_hundred_percent_acceptance_is_an_artefact() -> None:
    df = frame("a", [10.0, 12.0, 8.0, 0.0], [10.0, 12.0, 8.0, 0.0])
    (found,) = acceptance.acceptance_artefact("a", df, {})
    assert found.code == "ACCEPTANCE_ARTEFACT" and "all 3 drafting requests" in found.evidence
    assert acceptance.acceptance_artefact("a", frame("a", [10.0] * 3, [7.0, 10.0, 9.0]), {}) == []


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
    sources = acceptance_sources("a", df, cells, LLAMA)
    assert sources["timings"]["rate"] == 0.55 and sources["log"]["rate"] == 0.55
    assert sources["metrics"]["rate"] == 0.9 and sources["metrics"]["mean_accepted_length"] == pytest.approx(
        4.6
    )
    (found,) = acceptance.acceptance_artefact("a", df, sources)
    assert "sources disagree" in found.evidence and "metrics 0.900" in found.evidence


def test_confound_names_the_differing_flags() -> None:
    arms = {
        "baseline": ["-c", "4096", "-np", "1"],
        "draft": ["-c", "4096", "-np", "1", *DRAFT],
        "mtp": ["-c", "8192", "-np", "1", "--spec-type", "draft-mtp"],
    }
    (found,) = confound.confounds(arms, "baseline", LLAMA)
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
    eq = outputs.output_equivalence(df, "spec", "base")
    assert (eq.pairs, eq.exact_match_rate, eq.mean_levenshtein, eq.median_first_divergence) == (
        2,
        0.5,
        0.5,
        3.0,
    )
    (found,) = outputs.output_drift(df, ["base", "spec"], "base")
    assert found.code == "OUTPUT_DRIFT" and "50% of 2" in found.evidence
    same = texts([("base", "p1", "x"), ("spec", "p1", "x")])
    assert outputs.output_drift(same, ["base", "spec"], "base") == []


def call_record(arm: str, name: str, args: list[str], pid: str = "p") -> dict[str, Any]:
    chunks = [
        [1, None, None, [{"index": 0, "id": "c1", "type": "function", "function": {"name": name}}], None]
    ]
    chunks += [
        [2 + i, None, None, [{"index": 0, "function": {"arguments": a}}], None] for i, a in enumerate(args)
    ]
    return {"arm": arm, "prompt_id": pid, "repeat": 0, "warmup": False, "error": None, "chunks": chunks}


def test_tool_calls_are_reassembled_from_fragments() -> None:
    (call,) = outputs.tool_calls(read_record(call_record("a", "get_weather", ['{"ci', 'ty": "Lisbon"}'])))
    assert call == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    assert outputs.call_signature(call) == ("get_weather", True, ("city",))


def test_toolcall_mismatch_on_name_keys_or_json() -> None:
    base = read_record(call_record("base", "get_weather", ['{"city": "Lisbon"}']))
    good = read_record(call_record("spec", "get_weather", ['{"city": "Lisbon"}']))
    assert outputs.toolcall_mismatch([base, good], ["base", "spec"], "base") == []
    broken = read_record(call_record("spec", "get_weather", ['{"city": "Lis']))
    (found,) = outputs.toolcall_mismatch([base, broken], ["base", "spec"], "base")
    assert found.code == "TOOLCALL_MISMATCH" and "1 with invalid JSON" in found.evidence


# -- issue 15: speculation state, comparable sources, self-draft ------------------------------
NGRAM = ["--spec-type", "ngram-mod"]


def test_no_drafts_when_the_server_says_speculation_is_on() -> None:
    df = frame("ngram", [0.0] * 10, [0.0] * 10)
    cells = [{"arm": "ngram", "server": {"slots_speculative": [True]}, "log_lines": []}]
    (found,) = speculation.silent_fallback("ngram", NGRAM, df, cells, [], LLAMA)
    assert found.code == "NO_DRAFTS" and found.severity == "warning"
    assert "/slots reports speculative=true" in found.evidence and "100% of 10 requests" in found.evidence


def test_zero_cell_counters_without_the_servers_word_are_a_fallback() -> None:
    # vLLM without per-request metrics: the counters exist but never moved in the whole cell.
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    unknown = frame("ngram", [float("nan")] * 10, [float("nan")] * 10)
    zero = {"drafts": 5.0, "draft_tokens": 20.0, "accepted": 10.0}
    cells = [{"arm": "ngram", "metrics_before": {"spec": zero}, "metrics_after": {"spec": zero}}]
    (found,) = speculation.silent_fallback("ngram", spec, unknown, cells, [], VllmEngine())
    assert found.code == "SILENT_FALLBACK" and "drafted 0 tokens over 1 cell" in found.evidence


def log_line(accepted: int, drafted: int) -> str:
    head = "slot print_timing: id  0 | task 3 | draft acceptance = 0.5"
    return f"{head} ({accepted:5d} accepted / {drafted:5d} generated)"


def test_a_log_that_misses_the_last_requests_line_is_partial_not_a_disagreement() -> None:
    df = frame("a", [30.0, 25.0], [20.0, 16.0]).assign(repeat=0)
    cells = [
        {
            "arm": "a",
            "repeat": 0,
            "log_window": "measured",
            "metrics_before": {"spec": {"drafts": 0, "draft_tokens": 0, "accepted": 0}},
            "metrics_after": {"spec": {"drafts": 20, "draft_tokens": 55, "accepted": 36}},
            "log_lines": [log_line(20, 30)],  # the second request's line was not written yet
        }
    ]
    sources = acceptance_sources("a", df, cells, LLAMA)
    assert sources["log"]["partial"] and "lines for 1 of 2 drafting requests" in sources["log"]["coverage"]
    assert acceptance.acceptance_artefact("a", df, sources) == []
    cells[0]["log_lines"] = [log_line(20, 30), log_line(10, 25)]  # complete, and it disagrees
    (found,) = acceptance.acceptance_artefact("a", df, acceptance_sources("a", df, cells, LLAMA))
    assert "disagree over the same measured requests" in found.evidence and "log 0.545" in found.evidence


def test_a_log_read_over_the_whole_launch_is_partial() -> None:
    df = frame("a", [30.0], [20.0]).assign(repeat=0)
    cells = [{"arm": "a", "repeat": 0, "log_lines": [log_line(20, 30), log_line(9, 9)]}]  # warm-up in
    sources = acceptance_sources("a", df, cells, LLAMA)
    assert sources["log"]["partial"] and "warm-ups included" in sources["log"]["coverage"]
    assert acceptance.acceptance_artefact("a", df, sources) == []


def test_vllm_interval_log_is_partial_and_acceptance_falls_back_to_counters() -> None:
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    df = frame("ngram", [float("nan")] * 4, [float("nan")] * 4).assign(repeat=0)
    line = "SpecDecoding metrics: Mean acceptance length: 2.5, Accepted: 72 tokens, Drafted: 100 tokens"
    cells = [
        {
            "arm": "ngram",
            "repeat": 0,
            "metrics_before": {"spec": {"drafts": 0, "draft_tokens": 0, "accepted": 0}},
            "metrics_after": {"spec": {"drafts": 160, "draft_tokens": 642, "accepted": 496}},
            "log_lines": [line],
        }
    ]
    sources = acceptance_sources("ngram", df, cells, VllmEngine())
    if "log" in sources:
        assert sources["log"]["partial"]
    assert acceptance.acceptance_artefact("ngram", df, sources) == []
    assert speculation.silent_fallback("ngram", spec, df, cells, [], VllmEngine()) == []
    from specbench.analysis.evidence.acceptance import preferred_rate

    assert preferred_rate(sources) == (pytest.approx(496 / 642), "metrics")


def test_a_self_draft_is_recognised(tmp_path: Any) -> None:
    target = tmp_path / "t.gguf"
    target.write_bytes(b"x")
    found = acceptance.self_draft(
        "self", ["-md", str(target), "--spec-type", "draft-simple"], str(target), LLAMA
    )
    assert found is not None and found.code == "SELF_DRAFT" and found.severity == "info"
    # what the speedup prices, exactly: not "only the verification overhead" (the drafts cost too)
    assert "K draft passes of the full target model plus one verification pass" in found.evidence
    assert acceptance.self_draft("d", ["-md", str(tmp_path / "d.gguf")], str(target), LLAMA) is None


def test_a_large_slowdown_outranks_a_doubtful_acceptance() -> None:
    from specbench.analysis import spec_loss_severity

    assert spec_loss_severity(0.15) == "error"  # ×0.133 (CI up to 0.15): a 7.5× slowdown
    assert spec_loss_severity(0.97) == "warning"


def test_per_request_spec_metrics_is_a_speculative_only_flag_not_a_confound() -> None:
    spec = ["--speculative-config", '{"method": "ngram"}', "--per-request-spec-decode-metrics", "summary"]
    arms = {"baseline": [], "ngram": spec}
    assert confound.confounds(arms, "baseline", engine=VllmEngine()) == []
    assert not VllmEngine().speculates(["--per-request-spec-decode-metrics", "summary"])
    assert VllmEngine().speculates(spec)
