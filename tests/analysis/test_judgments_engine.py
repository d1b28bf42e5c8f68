"""Judgments on the real llama-server with lab models (issue 15): no false finding, no missed one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import api
from specbench.analysis import judge, load_run
from specbench.analysis.evidence import acceptance
from specbench.errors import ConfigError
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import draft4, write_matrix

pytestmark = pytest.mark.engine


def run(matrix: Path, out: Path) -> Path:
    api.prepare_run(matrix, out).run()
    return out


def codes(out: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in judge(load_run(out)):
        found.setdefault(f.code, []).append(f.evidence)
    return found


def test_a_never_matching_ngram_arm_is_no_drafts_not_a_fallback(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    # 16 output tokens never build an n-gram the drafter can match, while /slots says it is on.
    arms = {"baseline": [], "ngram": ["--spec-type", "ngram-mod"]}
    workload = {"suite": "natural", "max_tokens": 16, "prompts": 3, "prompt_file": "prompts.jsonl"}
    out = run(
        write_matrix(tmp_path, moe_pair, llama_server, arms, repeats=1, workload=workload), tmp_path / "r"
    )
    found = codes(out)
    assert "SILENT_FALLBACK" not in found, found
    (evidence,) = found["NO_DRAFTS"]
    assert "/slots reports speculative=true" in evidence and "100% of 3 requests" in evidence


def test_the_log_covers_exactly_the_measured_requests(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    # The warm-up drafts too, and each request's line is written after its last token: the log
    # must hold one line per measured drafting request, read after the last one was written.
    arms = {"baseline": [], "draft4": draft4(moe_pair)}
    out = run(write_matrix(tmp_path, moe_pair, llama_server, arms, repeats=1), tmp_path / "r")
    data = load_run(out)
    (cell,) = [c for c in data.cells if c["arm"] == "draft4"]
    drafting = int((data.df.loc[data.df["arm"] == "draft4", "draft_n"] > 0).sum())
    assert (
        cell["log_window"] == "measured" and cell["log_lines_found"] == cell["log_lines_expected"] == drafting
    )
    assert sum("draft acceptance" in ln for ln in cell["log_lines"]) == drafting
    sources = acceptance.acceptance_sources("draft4", data.df, data.cells, data.engine)
    assert not any(s["partial"] for s in sources.values()), sources
    assert sources["log"]["drafted"] == sources["timings"]["drafted"] == sources["metrics"]["drafted"]
    assert "ACCEPTANCE_ARTEFACT" not in codes(out)
    # every cell records the box it ran on
    assert all(c["machine_load"]["cpus"] and c["machine_load"]["load_end"] >= 0 for c in data.cells)
    assert data.df["server_decode_tok_s"].notna().all()  # llama.cpp timed every request itself


def test_a_self_draft_is_recognised_not_an_artefact(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    self_draft = ["-md", str(moe_pair.target), "--spec-type", "draft-simple", "--spec-draft-n-max", "4"]
    arms = {"baseline": [], "self": self_draft}
    out = run(write_matrix(tmp_path, moe_pair, llama_server, arms, repeats=1), tmp_path / "r")
    found = codes(out)
    assert "SELF_DRAFT" in found and "SILENT_FALLBACK" not in found
    assert not any("accepted == drafted" in e for e in found.get("ACCEPTANCE_ARTEFACT", []))


def test_a_resent_prompt_is_a_cached_prefill(llama_server: Path, moe_pair: Pair, tmp_path: Path) -> None:
    arms = {"baseline": []}
    matrix = write_matrix(tmp_path, moe_pair, llama_server, arms, repeats=1)
    text = "Explain in detail how a ship's hull keeps water out, and why rivets were replaced by welds."
    prompts = [{"id": f"same-{i}", "category": "chat", "prompt": text} for i in range(3)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    found = codes(run(matrix, tmp_path / "r"))
    (evidence,) = found["CACHED_PREFILL"]
    assert "2 of 3 requests" in evidence


def test_the_length_sweep_keeps_every_request_cold(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    workload = {
        "suite": "length-sweep",
        "lengths": [8, 16],
        "prompts": 2,
        "input_tokens": 120,
        "prompt_file": "prompts.jsonl",
    }
    arms = {"baseline": []}
    out = run(
        write_matrix(tmp_path, moe_pair, llama_server, arms, repeats=1, workload=workload), tmp_path / "r"
    )
    records = [r for r in RunStore(out).records() if not r["warmup"]]
    bases = [r["prompt_id"].split("@")[0] for r in records]
    assert len(records) == 4 and len(set(bases)) == 4  # no prompt re-sent at another length
    assert all(r["timings"]["cache_n"] < 0.5 * r["usage"]["prompt_tokens"] for r in records)
    assert "CACHED_PREFILL" not in codes(out)


def test_a_prompt_longer_than_its_target_stops_the_run(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    workload = {
        "suite": "single",
        "max_tokens": 8,
        "prompts": 1,
        "input_tokens": 12,
        "prompt_file": "prompts.jsonl",
    }
    long = "Summarise the history of the printing press, its spread across Europe and its effects. " * 4
    matrix = write_matrix(tmp_path, moe_pair, llama_server, {"baseline": []}, repeats=1, workload=workload)
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"id": "press", "prompt": long}) + "\n")
    with pytest.raises(ConfigError, match=r"prompt 'press' fitted to \d+ tokens, target 12"):
        api.prepare_run(matrix, tmp_path / "r").run()
