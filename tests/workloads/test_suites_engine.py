"""Every suite runs through the runner on a lab model, scaled down for a 2-core CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench import api
from specbench.analysis.metrics import frame
from specbench.report.answer import answer_lines
from specbench.store.rundir import RunStore
from specbench.workloads.suites import SUITES
from tests.support.lab import Pair
from tests.support.matrices import SHORT_PROMPTS

pytestmark = pytest.mark.engine


def run_suite(tmp_path: Path, pair: Pair, llama_server: Path, suite: str, **workload: object) -> RunStore:
    matrix = {
        "model": str(pair.target),
        "common_args": ["-c", "4096", "-np", "1"],
        "arms": {"baseline": []},
        "workload": {"suite": suite, "scale": 0.02, "max_tokens": 8, "prompts": 2, **workload},
        "repeats": 1,
        "warmup": 0,
        "engine_binary": str(llama_server),
    }
    # A fitted prompt may not miss its target (length.check_fit): the bundled prompts run to
    # ~1600 lab-tokenizer tokens and the agent's tools to ~375, above the scaled targets, so the
    # suites run on short prompts and fitting suites get a reachable target.
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix["workload"]["prompt_file"] = "prompts.jsonl"  # type: ignore[index]
    if SUITES[suite].input_tokens and "input_tokens" not in workload and "scale" not in workload:
        matrix["workload"]["input_tokens"] = 600  # type: ignore[index]
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    api.prepare_run(path, tmp_path / "run").run()
    return RunStore(tmp_path / "run")


@pytest.mark.parametrize("suite", sorted(set(SUITES) - {"length-sweep", "concurrency-sweep"}))
def test_suite_runs_on_the_lab_model(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, suite: str
) -> None:
    # Scaled targets are shorter than the bundled prompts and the agent's tools: a fitted prompt
    # may not miss its target (length.check_fit), so fitting suites get a reachable one.
    store = run_suite(tmp_path, dense_pair, llama_server, suite)
    records = store.records()
    assert records and all(r["error"] is None for r in records), [r["error"] for r in records if r["error"]]
    assert all(r["usage"]["completion_tokens"] == 8 for r in records)
    if SUITES[suite].input_tokens:
        assert all(r["request"]["fitted_tokens"] for r in records)


def test_length_sweep_reaches_every_length(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    store = run_suite(tmp_path, dense_pair, llama_server, "length-sweep", max_tokens=None, lengths=[8, 32])
    df = frame(store.records())
    assert sorted(df["output_tokens"].unique()) == [8, 32]
    assert not df["stopped_early"].any()


def test_concurrency_sweep_records_levels(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    store = run_suite(tmp_path, dense_pair, llama_server, "concurrency-sweep", levels=[1, 4])
    levels = [r["concurrency"] for r in store.records()]
    assert levels.count(1) == 2 and levels.count(4) == 4
    assert {r["phase"] for r in store.records()} == {"c1", "c4"}


def test_a_real_concurrency_sweep_is_analysed_level_by_level(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """Issue 40 on the real llama-server: a sweep at 1 and 4 in flight, two arms, three launches.
    Whatever the speeds on this machine, the answer is per level (never one pooled line), every
    measure is compared at every level, and no distribution finding is read across levels."""
    from specbench.analysis import analyse_dir

    matrix = {
        "model": str(dense_pair.target),
        "common_args": ["-c", "4096", "-np", "4", "-t", "1"],
        "arms": {
            "baseline": [],
            "ngram": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2"],
        },
        "workload": {"suite": "concurrency-sweep", "levels": [1, 4], "prompts": 2, "max_tokens": 16},
        "repeats": 3,
        "warmup": 0,
        "forward_probe": False,
        "engine_binary": str(llama_server),
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    api.prepare_run(path, tmp_path / "run").run()
    a = analyse_dir(tmp_path / "run")
    names = ["concurrency-sweep @ 1 in flight", "concurrency-sweep @ 4 in flight"]
    assert [d.workload for d in a.decisions] == names
    assert {d.measure for d in a.decisions} == {"throughput"}
    assert not any(line.startswith("concurrency-sweep:") for line in answer_lines(a))
    table = a.operating_points
    assert set(table["point"]) == set(names) and set(table["arm"]) == {"ngram"}
    assert {"throughput", "ttft_p99", "e2e_p99", "decode"} <= set(table["measure"])
    assert (table["launches"] == 3).all()
    spread = [f for f in a.findings if f.code in ("DRIFT", "BIMODAL", "UNSTABLE", "STALLED")]
    assert all(f.point in names for f in spread)


def test_cache_reuse_shows_cached_tokens(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    store = run_suite(tmp_path, dense_pair, llama_server, "cache-reuse", prompts=3, scale=0.1)
    df = frame(store.records())
    identical = df[df["category"] == "cache-identical"].sort_values("seq")
    prefix = df[df["category"] == "cache-prefix"].sort_values("seq")
    assert identical["cached_tokens"].iloc[1:].min() >= 0.9 * identical["prompt_tokens"].iloc[0]
    # later requests reuse the shared document: at least its fitted length comes from the cache
    document = min(r["request"]["fitted_tokens"] for r in store.records() if r["category"] == "cache-prefix")
    assert (prefix["cached_tokens"].iloc[1:] >= 0.5 * document).all()
    assert prefix["cached_tokens"].iloc[0] < prefix["cached_tokens"].iloc[1:].min()
