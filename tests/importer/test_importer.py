"""Importing other harnesses' per-request results: the same analysis must judge them.

The input files are written here with known values, so each test knows what the analysis
should conclude (faster, SILENT_FALLBACK, CONFOUND, ACCEPTANCE_ARTEFACT) before it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench import analysis
from specbench.analysis import metrics
from specbench.errors import ConfigError
from specbench.importer import import_file, parse_columns, parse_map
from specbench.store.rundir import RunStore

N_PROMPTS = 12


def rows(
    arm: str,
    speed: float,
    *,
    drafted: int = 0,
    accepted: int = 0,
    seed: int = 0,
    **extra: Any,
) -> list[dict[str, Any]]:
    """N_PROMPTS llama-server-like rows for one arm: ±3 % jitter around ``speed`` tok/s."""
    rng = np.random.default_rng(seed)
    return [
        {
            "config": arm,
            "prompt_id": f"p{i:02d}",
            "predicted_per_second": round(speed * (1 + rng.uniform(-0.03, 0.03)), 3),
            "draft_n": drafted,
            "draft_n_accepted": accepted,
            "prompt_ms": 20.0 + i,
            **extra,
        }
        for i in range(N_PROMPTS)
    ]


def write_csv(path: Path, data: list[dict[str, Any]]) -> Path:
    pd.DataFrame(data).to_csv(path, index=False)
    return path


def codes(run: analysis.RunData) -> dict[str, set[tuple[str, ...]]]:
    out: dict[str, set[tuple[str, ...]]] = {}
    for f in analysis.judge(run):
        out.setdefault(f.code, set()).add(f.arms)
    return out


def summary(run: analysis.RunData) -> dict[str, dict[str, Any]]:
    return {row["arm"]: row for row in analysis.arm_summary(run).to_dict("records")}


# -- the analyses an import must support -------------------------------------------------------
def test_csv_faster_speculative_arm(tmp_path: Path) -> None:
    data = rows("base", 50.0, spec_type="none") + rows(
        "spec", 80.0, drafted=40, accepted=28, seed=1, spec_type="draft-simple"
    )
    result = import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", flags=["spec_type"])
    assert result.records == 24 and result.arms == {"base": 12, "spec": 12} and result.skipped == 0
    assert result.baseline == "base"  # the only arm that does not speculate
    run = analysis.load_run(tmp_path / "run")
    assert run.manifest["matrix"]["arms"] == {"base": [], "spec": ["--spec-type", "draft-simple"]}
    table = summary(run)
    # One launch per arm: the ratio is reported, but launch noise cannot be told from the effect
    assert table["spec"]["verdict"] == "undetermined (LOW_N: 1 launch)"
    assert any(f.code == "LOW_N" and f.arms == ("spec", "base") for f in analysis.judge(run))
    assert table["spec"]["speedup"] == pytest.approx(1.6, rel=0.05)
    assert table["spec"]["acceptance"] == pytest.approx(0.7)
    assert table["base"]["decode_tok_s"] == pytest.approx(50.0, rel=0.03)
    assert run.df["prefill_ms"].notna().all()  # prompt_ms → prefill_ms
    found = codes(run)
    assert not {"SILENT_FALLBACK", "CONFOUND", "ACCEPTANCE_ARTEFACT"} & set(found)
    rec = run.records[0]
    assert rec.line["source"] == {"file": "r.csv", "row": 0, "derived": []}
    # written as llama.cpp's fields (the line's shape), read as the engine-neutral counts
    assert rec.line["timings"] == {"draft_n": 0, "draft_n_accepted": 0} and rec.category == "imported"
    assert (rec.counts.drafted, rec.counts.accepted) == (0.0, 0.0)
    assert (tmp_path / "run" / "source" / "r.csv").is_file()


def test_speculative_arm_that_never_drafts_is_a_silent_fallback(tmp_path: Path) -> None:
    data = rows("base", 50.0, spec_type="none") + rows("spec", 50.0, seed=1, spec_type="draft-simple")
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", flags=["spec_type"])
    found = codes(analysis.load_run(tmp_path / "run"))
    assert found["SILENT_FALLBACK"] == {("spec",)}


def test_flag_column_differing_between_arms_is_a_confound(tmp_path: Path) -> None:
    base = rows("base", 50.0, spec_type="none", draft_max=0, gpu_memory_utilization=0.9)
    spec = rows("spec", 70.0, drafted=40, accepted=30, seed=1, spec_type="draft-simple", draft_max=16)
    for row in spec:
        row["gpu_memory_utilization"] = 0.8
    path = write_csv(tmp_path / "r.csv", base + spec)
    columns = parse_columns(["spec_type,draft_max", "gpu_memory_utilization"])
    import_file(path, tmp_path / "run", flags=columns)
    run = analysis.load_run(tmp_path / "run")
    assert run.arm_args("base") == ["--gpu-memory-utilization", "0.9"]  # "none" and 0 switch speculation off
    assert run.arm_args("spec") == [
        *("--spec-type", "draft-simple", "--spec-draft-max", "16"),
        *("--gpu-memory-utilization", "0.8"),
    ]
    confounds = [f for f in analysis.judge(run) if f.code == "CONFOUND"]
    assert len(confounds) == 1 and "--gpu-memory-utilization" in confounds[0].evidence


def test_request_setting_differing_between_arms_is_a_confound(tmp_path: Path) -> None:
    data = rows("base", 50.0, max_tokens=256, temperature=0) + rows(
        "spec", 70.0, drafted=40, accepted=30, seed=1, max_tokens=128, temperature=0
    )
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", baseline="base")
    run = analysis.load_run(tmp_path / "run")
    assert run.arm_args("base") == ["--max-tokens", "256"]  # temperature is equal: not a flag
    assert run.records[0].request == {"max_tokens": 256, "temperature": 0.0}
    confounds = [f for f in analysis.judge(run) if f.code == "CONFOUND"]
    assert len(confounds) == 1 and "--max-tokens" in confounds[0].evidence


def test_accepted_equal_to_drafted_is_an_acceptance_artefact(tmp_path: Path) -> None:
    data = rows("base", 50.0, spec_type="none") + rows(
        "spec", 70.0, drafted=32, accepted=32, seed=1, spec_type="ngram-simple"
    )
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", flags=["spec_type"])
    found = codes(analysis.load_run(tmp_path / "run"))
    assert found["ACCEPTANCE_ARTEFACT"] == {("spec",)}


def test_greedy_outputs_that_differ_are_output_drift(tmp_path: Path) -> None:
    data = rows("base", 50.0, output_text="the answer", temperature=0.0) + rows(
        "spec", 70.0, seed=1, output_text="the answer", temperature=0.0
    )
    data[-1]["output_text"] = "another answer"
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", baseline="base")
    run = analysis.load_run(tmp_path / "run")
    assert metrics.output_text(run.records[0]) == "the answer"
    assert run.df["ttft_ms"].isna().all()  # the text's chunk invents no latency
    assert codes(run)["OUTPUT_DRIFT"] == {("base", "spec")}


# -- input shapes -------------------------------------------------------------------------------
def test_jsonl_with_nested_llama_server_timings(tmp_path: Path) -> None:
    lines = []
    for arm, speed, drafted in (("plain", 40.0, 0), ("draft", 60.0, 16)):
        for i in range(4):
            timings = {"predicted_per_second": speed + i, "draft_n": drafted}
            timings["draft_n_accepted"] = drafted // 2
            usage = {"prompt_tokens": 30, "completion_tokens": 64}
            lines.append({"variant": arm, "question_id": i, "usage": usage, "timings": timings})
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = import_file(path, tmp_path / "run", baseline="plain")
    assert result.columns["decode_tok_s"] == "timings.predicted_per_second"
    assert result.columns["output_tokens"] == "usage.completion_tokens"
    run = analysis.load_run(tmp_path / "run")
    table = summary(run)
    assert table["draft"]["decode_tok_s"] == pytest.approx(61.5)
    assert table["draft"]["acceptance"] == pytest.approx(0.5)
    assert run.df["output_tokens"].eq(64).all() and run.records[0].prompt_id == "0"


def vllm_detailed(ttft_s: float, gap_s: float, n: int = 5) -> dict[str, Any]:
    """The shape ``vllm bench serve --save-result --save-detailed`` writes (times in seconds)."""
    return {
        "backend": "vllm",
        "completed": n,
        "mean_ttft_ms": ttft_s * 1000,
        "input_lens": [100] * n,
        "output_lens": [11] * n,
        "ttfts": [ttft_s] * n,
        "itls": [[gap_s] * 10 for _ in range(n)],
        "generated_texts": ["x"] * n,
        "errors": [""] * (n - 1) + ["timeout"],
    }


def test_vllm_detailed_json_seconds_become_ms_and_latency_is_derived(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({"base": vllm_detailed(0.05, 0.02), "eagle": vllm_detailed(0.06, 0.01)}))
    result = import_file(path, tmp_path / "run", baseline="base")
    assert result.arms == {"base": 5, "eagle": 5} and result.columns["ttft_ms"] == "ttfts"
    run = analysis.load_run(tmp_path / "run")
    table = summary(run)
    assert table["base"]["ttft_ms"] == pytest.approx(50.0)
    assert table["base"]["e2e_ms"] == pytest.approx(250.0)  # 50 ms + 10 gaps of 20 ms
    assert table["base"]["decode_tok_s"] == pytest.approx(50.0)  # 10 tokens in 200 ms
    assert table["eagle"]["decode_tok_s"] == pytest.approx(100.0)
    assert table["eagle"]["errors"] == 1 and table["eagle"]["requests"] == 4
    assert run.records[0].line["source"]["derived"] == ["e2e_ms", "decode_tok_s", "tpot_ms"]


def test_single_vllm_object_with_constant_arm(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(vllm_detailed(0.05, 0.02)))
    result = import_file(path, tmp_path / "run", mapping=parse_map(["arm==eagle3"]))
    assert result.arms == {"eagle3": 5} and result.columns["prompt"] == "request_index"
    assert [r["prompt_id"] for r in RunStore(tmp_path / "run").records()] == ["0", "1", "2", "3", "4"]


def test_explicit_map_with_unit(tmp_path: Path) -> None:
    data = [{"who": a, "q": i, "wall": 1.5 if a == "b" else 2.0} for a in "ab" for i in range(3)]
    path = write_csv(tmp_path / "r.csv", data)
    import_file(path, tmp_path / "run", mapping=parse_map(["arm=who,prompt=q", "e2e_ms=wall:s"]))
    run = analysis.load_run(tmp_path / "run")
    assert summary(run)["b"]["e2e_ms"] == pytest.approx(1500.0)
    assert run.records[0].repeat == 0 and run.baseline == "a"


def test_repeat_is_the_occurrence_index_of_arm_and_prompt(tmp_path: Path) -> None:
    data = [{"arm": "a", "prompt": "p", "decode_tok_s": 10.0 + k} for k in range(3)]
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run")
    assert [r["repeat"] for r in RunStore(tmp_path / "run").records()] == [0, 1, 2]


# -- mistakes in the input --------------------------------------------------------------------
def test_missing_required_field_names_the_columns_found(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "results.csv", [{"a": 1, "b": 2, "c": 3}])
    with pytest.raises(ConfigError) as err:
        import_file(path, tmp_path / "run")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("results.csv: no column for 'arm', 'prompt' (use --map arm=COLUMN")
    assert message.endswith("columns found: a, b, c")
    assert not (tmp_path / "run").exists()  # nothing is written before everything is checked


def test_missing_measurement_is_an_error(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", [{"arm": "a", "prompt": "p", "x": 1}])
    with pytest.raises(ConfigError, match=r"no column for 'decode_tok_s' or 'e2e_ms'.*columns found: arm"):
        import_file(path, tmp_path / "run")


def test_flag_not_constant_within_an_arm(tmp_path: Path) -> None:
    data = rows("base", 50.0, ctx=4096)
    data[3]["ctx"] = 8192
    with pytest.raises(ConfigError, match="'ctx' is not constant within arm 'base'"):
        import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run", flags=["ctx"])


def test_bad_inputs_are_config_errors(tmp_path: Path) -> None:
    data = rows("base", 50.0)
    data[2]["predicted_per_second"] = "fast"
    path = write_csv(tmp_path / "r.csv", data)
    with pytest.raises(ConfigError, match=r"'predicted_per_second'.*'fast' in row 2"):
        import_file(path, tmp_path / "run")
    with pytest.raises(ConfigError, match="--baseline 'nope' is not an arm"):
        import_file(write_csv(tmp_path / "ok.csv", rows("base", 50.0)), tmp_path / "run", baseline="nope")
    with pytest.raises(ConfigError, match="unknown field speed"):
        import_file(path, tmp_path / "run", mapping={"speed": "x"})
    with pytest.raises(ConfigError, match="--format"):
        import_file(tmp_path / "r.txt", tmp_path / "run")
    with pytest.raises(ConfigError, match="not a number"):
        import_file(path, tmp_path / "run", mapping={"decode_tok_s": "=fast"})
    with pytest.raises(ConfigError, match="not FIELD=COLUMN"):
        parse_map(["arm"])


# -- round trip ---------------------------------------------------------------------------------
def native_record(arm: str, prompt: int, seq: int, tok_s: float, rng: np.random.Generator) -> dict[str, Any]:
    """A record shaped as drive.CellDriver._one writes it: raw chunks, usage, timings."""
    ttft_ns = int(rng.uniform(20, 40) * 1e6)
    gap_ns = int(1e9 / tok_s * rng.uniform(0.97, 1.03))
    chunks = [[ttft_ns + k * gap_ns, "t", None, None, None] for k in range(16)]
    chunks[-1][4] = "length"
    drafted = 0 if arm == "base" else 12
    return {
        "arm": arm,
        "repeat": 0,
        "workload": "chat",
        "prompt_id": f"p{prompt}",
        "category": "qa",
        "warmup": False,
        "seq": seq,
        "request": {"max_tokens": 16, "temperature": 0.0, "seed": 0, "ignore_eos": True},
        "chunks": chunks,
        "t_end_ns": chunks[-1][0] + 1_000_000,
        "usage": {"prompt_tokens": 20, "completion_tokens": 16},
        "timings": {"draft_n": drafted, "draft_n_accepted": drafted * 2 // 3},
        "error": None,
    }


def test_round_trip_native_run_through_csv(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    store = RunStore(tmp_path / "native")
    matrix = {"engine": "llamacpp", "common_args": [], "arms": {"base": [], "spec": []}, "baseline": "base"}
    store.create({"matrix": matrix}, resume=False)
    seq = 0
    for prompt in range(N_PROMPTS):
        for arm, speed in (("base", 40.0), ("spec", 64.0)):
            seq += 1
            store.append_record(native_record(arm, prompt, seq, speed, rng))
    native = analysis.load_run(tmp_path / "native")
    csv = tmp_path / "frame.csv"
    metrics.frame(native.records).to_csv(csv, index=False)

    import_file(csv, tmp_path / "imported", baseline="base")
    imported = analysis.load_run(tmp_path / "imported")
    before, after = summary(native), summary(imported)
    for arm in ("base", "spec"):
        for col in ("requests", "ttft_ms", "decode_tok_s", "e2e_ms", "acceptance", "speedup", "ci_low"):
            assert after[arm][col] == pytest.approx(before[arm][col], rel=1e-9, nan_ok=True), (arm, col)
    assert after["spec"]["verdict"] == before["spec"]["verdict"] == "undetermined (LOW_N: 1 launch)"
    assert imported.records[0].category == "qa" and imported.records[0].workload == "chat"
    cols = ["tpot_ms", "itl_ms", "output_tokens", "stopped_early"]
    pd.testing.assert_frame_equal(imported.df[cols], native.df[cols])


# -- issue 15: imported arms get the speculation checks ------------------------------------------
def test_a_declared_speculative_arm_that_never_drafts_is_a_silent_fallback(tmp_path: Path) -> None:
    # No flag column says which arm speculates: the user declares it.
    data = rows("base", 50.0) + rows("spec", 50.0, seed=1) + rows("rerun", 50.0, seed=2)
    path = write_csv(tmp_path / "r.csv", data)
    import_file(path, tmp_path / "run", baseline="base", speculative=["spec"], controls=["rerun"])
    found = codes(analysis.load_run(tmp_path / "run"))
    assert found["SILENT_FALLBACK"] == {("spec",)}
    with pytest.raises(ConfigError, match="--speculative/--control 'nope' is not an arm"):
        import_file(path, tmp_path / "run2", speculative=["nope"])


def test_speculation_is_inferred_from_draft_columns(tmp_path: Path) -> None:
    data = rows("base", 50.0) + rows("spec", 70.0, drafted=32, accepted=32, seed=1)
    import_file(write_csv(tmp_path / "r.csv", data), tmp_path / "run")
    run = analysis.load_run(tmp_path / "run")
    assert run.baseline == "base" and run.speculates("spec") and not run.speculates("base")
    assert codes(run)["ACCEPTANCE_ARTEFACT"] == {("spec",)}


@pytest.mark.parametrize(
    ("csv", "column"),
    [
        ("arm,prompt,decode_tok_s\na,p,20\na,q,-5\n", "'decode_tok_s'"),
        ("arm,prompt,decode_tok_s\na,p,20\na,q,inf\n", "'decode_tok_s'"),
        ("arm,prompt,latency_ms\na,p,20\na,q,-1\n", "'latency_ms'"),
        ("arm,prompt,decode_tok_s,drafted,accepted_tokens\na,p,5,2,2\na,q,5,2,9\n", "'accepted_tokens'"),
    ],
    ids=["negative-rate", "infinite-rate", "negative-e2e", "accepted-over-drafted"],
)
def test_impossible_values_name_the_row_and_the_column(tmp_path: Path, csv: str, column: str) -> None:
    path = tmp_path / "in.csv"
    path.write_text(csv)
    with pytest.raises(ConfigError, match="row 1") as caught:
        import_file(path, tmp_path / "run", mapping={"e2e_ms": "latency_ms"} if "latency" in csv else None)
    assert column in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()  # checked before anything is written


def test_a_declared_arm_without_draft_columns_at_the_baselines_speed_is_flagged(tmp_path: Path) -> None:
    # vLLM-style rows: no draft column at all, so speed is the only evidence an arm speculated.
    data = (
        rows("base", 50.0)
        + rows("spec", 50.0, seed=1)
        + rows("fast", 80.0, seed=2)
        + rows("rerun", 50.0, seed=3)
    )
    for row in data:
        del row["draft_n"], row["draft_n_accepted"]
    path = write_csv(tmp_path / "r.csv", data)
    import_file(path, tmp_path / "run", baseline="base", speculative=["spec", "fast"], controls=["rerun"])
    run = analysis.load_run(tmp_path / "run")
    assert run.df["draft_n"].isna().all()
    found = codes(run)
    assert found["SAME_AS_BASELINE"] == {("spec", "base")}  # not the faster arm, not the control
    assert "SILENT_FALLBACK" not in found  # unknown draft counts are not zero drafts
    (same,) = [f for f in analysis.judge(run) if f.code == "SAME_AS_BASELINE"]
    assert same.severity == "warning" and "no per-request draft counts" in same.evidence
    # With draft counts the counts decide: zero drafts are a SILENT_FALLBACK, not this warning.
    drafted = rows("base", 50.0) + rows("spec", 50.0, seed=1)
    import_file(write_csv(tmp_path / "d.csv", drafted), tmp_path / "run2", speculative=["spec"])
    found = codes(analysis.load_run(tmp_path / "run2"))
    assert found["SILENT_FALLBACK"] == {("spec",)} and "SAME_AS_BASELINE" not in found
