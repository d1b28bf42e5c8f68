"""`specbench tune` end to end on the real llama-server: a tiny lab pair, two numeric
dimensions, two workloads, a small budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specbench.analysis import comparisons, load_run
from specbench.store.rundir import RunStore
from tests.support.lab import Pair, lab_pair
from tests.support.matrices import SHORT_PROMPTS, llama_servers_for

pytestmark = pytest.mark.engine

LAUNCHES = 15  # three rounds of baseline + four candidates: a verdict's worth, nothing more
WORKLOAD = {"suite": "natural", "prompts": 2, "prompt_file": "prompts.jsonl", "ignore_eos": True}


def write_matrix(folder: Path, pair: Pair, binary: Path, tune: dict[str, Any]) -> Path:
    """The tune matrix of these tests (the baseline alone, no forward probe) with ``tune``."""
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix = {
        "model": str(pair.target),
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": {"baseline": []},
        "engine_binary": str(binary),
        "forward_probe": False,
        "tune": tune,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def run_tune(matrix: Path, out: Path, *extra: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``specbench tune MATRIX --out OUT [extra]`` as a user runs it, output captured."""
    cmd = [sys.executable, "-m", "specbench.cli", "tune", str(matrix), "--out", str(out), *extra]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def test_tune_two_dimensions_two_workloads_within_budget(llama_server: Path, tmp_path: Path) -> None:
    pair = lab_pair(arch="dense", alpha=0.8)
    tune = {
        "dimensions": {
            "draft_model": [str(pair.draft)],
            "draft_n_max": [1, 4],
            "draft_p_min": [0.0, 0.8],
        },
        "workloads": {"short": {**WORKLOAD, "max_tokens": 12}, "long": {**WORKLOAD, "max_tokens": 32}},
        "budget": {"launches": LAUNCHES},
        "max_rounds": 5,  # room for the two screening rounds and a verdict after them
    }
    out = tmp_path / "tune"
    path = write_matrix(tmp_path, pair, llama_server, tune)
    done = run_tune(path, out, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not llama_servers_for(pair.target)

    log = json.loads((out / "tune.json").read_text())
    for name in ("short", "long"):
        assert f"{name}: " in done.stdout
        w = log["workloads"][name]
        assert len(w["candidates"]) == 4
        assert all(c["predicted"] is not None for c in w["candidates"])  # the lab pair's α: theory order
        assert w["state"]["order_reason"].startswith("theory")
        store = RunStore(out / name)
        assert len(store.cells()) <= LAUNCHES
        best = w["answer"]["best"]
        assert best in comparisons(load_run(out / name))  # an ordinary run: analysis reads it
        args = next(c["args"] for c in w["candidates"] if c["name"] == best)
        assert " ".join(args) in " ".join(w["best_command"]) and "--spec-draft-n-max" in w["best_command"]
        if w["answer"]["beats_baseline"] == "yes":  # only a candidate shown faster is served
            assert "serve it: " + " ".join(w["command"]) in done.stdout
        else:
            assert "--spec-draft-n-max" not in w["command"]
            assert "serve the baseline (speculation off): " + " ".join(w["command"]) in done.stdout
        # screening: round 1 measured the largest K (p-min off) and the theory predicted the rest
        assert [c["name"] for c in w["candidates"] if c["screen"] and c["screen"]["basis"] == c["name"]] == [
            "dmdraft-k4-p0_0"
        ]
        assert all(c["screen"] for c in w["candidates"])
    # the pinned build compiles per-request speculative settings out: the probe sees them ignored
    assert "per-request speculative settings: ignored by this server" in done.stdout
    # two workloads tuned separately: the long one's records never mix with the short one's
    assert {r["request"]["max_tokens"] for r in RunStore(out / "long").records()} == {32}

    launched = {name: len(RunStore(out / name).cells()) for name in ("short", "long")}
    again = run_tune(path, out, "--resume", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {name: len(RunStore(out / name).cells()) for name in ("short", "long")} == launched
    for name in ("short", "long"):
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(f"{name}: "))
        assert line in again.stdout  # a finished tune resumes to the same answer, launching nothing


def test_a_lookup_that_drafts_nothing_is_answered_from_its_largest_m(
    llama_server: Path, tmp_path: Path
) -> None:
    """The tiny lab pair's text holds no repeated n-gram: ngram-simple drafts nothing at m 8, so
    m 4 (same n) is answered unlaunched, and n 4 gets one more screening round of its m 8."""
    pair = lab_pair(arch="dense", alpha=0.8)
    tune = {
        "dimensions": {"method": ["ngram-simple"], "ngram_m": [4, 8], "ngram_n": [2, 4]},
        "workloads": {"short": {**WORKLOAD, "max_tokens": 32}},
        "max_rounds": 5,
        "refine": False,
    }
    out = tmp_path / "tune"
    done = run_tune(write_matrix(tmp_path, pair, llama_server, tune), out, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    store = RunStore(out / "short")
    launched = {(c["arm"], c["repeat"]) for c in store.cells()}
    assert {a for a, _ in launched} == {"baseline", "ngram_simple-m8-n2", "ngram_simple-m8-n4"}
    assert len(launched) == 6  # rounds 1–2: baseline + m 8 n 2; round 3: baseline + m 8 n 4
    w = json.loads((out / "tune.json").read_text())["workloads"]["short"]
    assert w["answer"]["serve"] == "baseline" and "--spec-type" not in w["command"]
    reasons = {c["name"]: c["reason"] for c in w["candidates"]}
    assert reasons["ngram_simple-m4-n2"].startswith(
        "skipped before launch: ngram_simple-m8-n2 drafted 0 tokens"
    )
    assert "every candidate drafts nothing on this workload" in done.stdout


def test_a_refinement_stage_launches_the_values_it_adds(llama_server: Path, tmp_path: Path) -> None:
    """max_rounds 3 ends the race after its first verdict, with a leader: the refinement adds
    K 5 (between 2 and 8) and launches it in each of its rounds. (It once crashed there: the
    race read the arms of the matrix it started with, not the refined one.)"""
    pair = lab_pair(arch="dense", alpha=0.8)
    tune = {
        "dimensions": {"draft_model": [str(pair.draft)], "draft_n_max": [2, 8]},
        "workloads": {"short": {**WORKLOAD, "max_tokens": 12}},
        "max_rounds": 3,
    }
    out = tmp_path / "tune"
    done = run_tune(write_matrix(tmp_path, pair, llama_server, tune), out, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    w = json.loads((out / "tune.json").read_text())["workloads"]["short"]
    refine = [ev for ev in w["state"]["events"] if ev["event"] == "refine"]
    assert len(refine) == 1 and refine[0]["added"] == ["dmdraft-k5"], w["state"]["events"]
    store = RunStore(out / "short")
    assert sorted(c["repeat"] for c in store.cells() if c["arm"] == "dmdraft-k5") == [3, 4, 5]
    assert "--spec-draft-n-max 5" in " ".join(store.manifest()["matrix"]["arms"]["dmdraft-k5"])
    assert "round 4 (refine, 1 of at most 3)" in done.stderr  # progress: on stderr, as every log line
