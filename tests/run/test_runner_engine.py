"""The runner on the real llama-server: complete records, faults, interruption and resume."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specbench import SCHEMA_VERSION, api
from specbench.analysis.predicted.setup import forward_curve
from specbench.engines import process
from specbench.run.forwardprobe import DEFAULT_REPS, DEFAULT_SIZES
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import draft4, llama_servers_for, planned, write_matrix
from tests.support.procs import sigint_as_usual

pytestmark = pytest.mark.engine


def test_records_are_complete_versioned_and_raw(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, dense_pair, llama_server, {"baseline": [], "draft4": draft4(dense_pair)})
    runner = api.prepare_run(matrix, tmp_path / "run")
    runner.run()
    store = RunStore(tmp_path / "run")
    records = store.records()
    prompts = [p["prompt_id"] for p in store.manifest()["prompts"]]
    assert {(r["arm"], r["prompt_id"], r["repeat"]) for r in records if not r["warmup"]} == planned(
        ["baseline", "draft4"], prompts
    )
    assert len(records) == 12 + 4  # 12 measured + one warm-up per cell
    assert all(r["schema_version"] == SCHEMA_VERSION and r["error"] is None for r in records)
    measured = [r for r in records if not r["warmup"]]
    assert all(r["usage"]["completion_tokens"] == 24 for r in measured)
    assert all("".join(c[1] or "" for c in r["chunks"]) == dense_pair.answer(24) for r in measured)
    cells = store.cells()
    assert [(c["arm"], c["repeat"]) for c in cells] == [
        ("baseline", 0),
        ("draft4", 0),
        ("draft4", 1),
        ("baseline", 1),
    ]
    draft_cell = next(c for c in cells if c["arm"] == "draft4")
    delta = (
        draft_cell["metrics_after"]["spec"]["draft_tokens"]
        - draft_cell["metrics_before"]["spec"]["draft_tokens"]
    )
    assert delta > 0 and draft_cell["server"]["slots_speculative"] == [True]
    assert any("draft acceptance" in line for line in draft_cell["log_lines"])
    # The forward probe ran once per baseline launch, and the server prefilled exactly what was sent.
    assert [c["arm"] for c in cells if "forward_probe" in c] == ["baseline", "baseline"]
    samples = [s for c in cells if c["arm"] == "baseline" for s in c["forward_probe"]["samples"]]
    assert len(samples) == 2 * len(DEFAULT_SIZES) * DEFAULT_REPS
    assert all(s["prompt_n"] == s["tokens"] and s["prompt_ms"] > 0 for s in samples)
    assert sorted(forward_curve(c["forward_probe"] for c in cells if "forward_probe" in c)) == list(
        DEFAULT_SIZES
    )
    manifest = store.manifest()
    assert (
        manifest["arms"]["draft4"]["status"] == "ok"
        and "--spec-type" in manifest["arms"]["draft4"]["command"]
    )
    assert store.env()["model"]["sha256"] and store.env()["engine"]["commit"] == "0c1e570"


def test_an_unknown_flag_fails_only_that_arm(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    # A flag the engine's --help lists, with a value it refuses only when it parses it: the
    # argument table lets it through, the launch fails (an unknown flag is now refused earlier).
    matrix = write_matrix(
        tmp_path, dense_pair, llama_server, {"baseline": [], "broken": ["--threads", "not-a-number"]}
    )
    runner = api.prepare_run(matrix, tmp_path / "run")
    runner.run()
    store = RunStore(tmp_path / "run")
    arm = store.manifest()["arms"]["broken"]
    assert arm["status"] == "failed" and "engine did not start" in arm["error"]
    assert "--threads" in arm["log_tail"] and "not-a-number" in arm["command"]
    assert len([r for r in store.records() if r["arm"] == "baseline" and not r["warmup"]]) == 6


def test_a_port_clash_moves_to_another_port(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    ports = [busy.getsockname()[1]]
    real = process.free_port
    monkeypatch.setattr("specbench.run.launch.free_port", lambda host: ports.pop() if ports else real(host))
    matrix = write_matrix(tmp_path, dense_pair, llama_server, {"baseline": []}, repeats=1)
    runner = api.prepare_run(matrix, tmp_path / "run")
    runner.run()
    busy.close()
    store = RunStore(tmp_path / "run")
    assert store.manifest()["arms"]["baseline"]["status"] == "ok"
    assert len(store.completed()) == 3


def test_engine_killed_mid_cell_is_restarted_and_nothing_is_lost(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        {"baseline": []},
        repeats=1,
        workload={"suite": "natural", "max_tokens": 200, "prompts": 4, "prompt_file": "prompts.jsonl"},
    )
    runner = api.prepare_run(matrix, tmp_path / "run")
    killed: list[int] = []

    def kill_after_first(event: str, info: dict[str, Any]) -> None:
        if event == "request" and not info["warmup"] and not killed:
            victim = llama_servers_for(dense_pair.target)[0]
            killed.append(victim.pid)
            victim.send_signal(signal.SIGKILL)

    runner.observe = kill_after_first
    runner.run()
    store = RunStore(tmp_path / "run")
    assert killed
    assert len(store.completed()) == 4
    ok = [r for r in store.records() if r["error"] is None and not r["warmup"]]
    assert len(ok) == len({(r["prompt_id"], r["repeat"]) for r in ok}) == 4  # no duplicates
    assert [c["attempt"] for c in store.cells()] == [0, 1]
    assert store.manifest()["arms"]["baseline"]["status"] == "ok"
    assert not llama_servers_for(dense_pair.target)


def test_sigint_leaves_no_engine_and_resume_completes_exactly(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        {"baseline": [], "draft4": draft4(dense_pair)},
        workload={"suite": "natural", "max_tokens": 150, "prompts": 4, "prompt_file": "prompts.jsonl"},
    )
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "specbench.cli", "run", str(matrix), "--out", str(out)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "120"},
        preexec_fn=sigint_as_usual,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(RunStore(out).completed() if out.exists() else ()) < 3:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "--resume" in output
    assert not llama_servers_for(dense_pair.target)
    before = len(RunStore(out).completed())
    assert 3 <= before < 16
    api.prepare_run(matrix, out, resume=True).run()
    store = RunStore(out)
    prompts = [p["prompt_id"] for p in store.manifest()["prompts"]]
    assert store.completed() == planned(["baseline", "draft4"], prompts)
    ok = [r for r in store.records() if r["error"] is None and not r["warmup"]]
    assert len(ok) == 16


def test_prompts_are_built_to_the_target_length_with_the_servers_tokenizer(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        {"baseline": []},
        repeats=1,
        workload={
            "suite": "single",
            "max_tokens": 8,
            "prompts": 3,
            "input_tokens": 300,
            "prompt_file": "prompts.jsonl",
        },
    )
    api.prepare_run(matrix, tmp_path / "run").run()
    store = RunStore(tmp_path / "run")
    fitted = store.fitted_prompts()
    assert len(fitted) == 3 and {f["counted_by"] for f in fitted.values()} == {"tokenize"}
    for rec in (r for r in store.records() if not r["warmup"]):
        # usage counts the chat template too; the target is for the content
        assert abs(rec["usage"]["prompt_tokens"] - 300) <= 0.05 * 300, rec["usage"]
        assert rec["request"]["fitted_tokens"] == fitted[rec["prompt_id"]]["tokens"]


def test_each_arms_first_launch_keeps_the_rendered_prompt_of_one_request_per_category(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    from specbench.report import render_report

    workload = {
        "suite": "single",
        "max_tokens": 4,
        "prompts": 3,
        "input_tokens": 120,
        "prompt_file": "prompts.jsonl",
    }
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        {"baseline": [], "ngram": ["--spec-type", "ngram-mod"]},
        workload=workload,
    )
    api.prepare_run(matrix, tmp_path / "run").run()
    store = RunStore(tmp_path / "run")
    fitted, cells = store.fitted_prompts(), store.cells()
    assert [("rendered_prompts" in c, c["repeat"]) for c in cells] == [
        (True, 0),
        (True, 0),
        (False, 1),
        (False, 1),
    ]
    for cell in cells[:2]:
        rendered = cell["rendered_prompts"]
        categories = {r["category"] for r in store.records() if r["arm"] == cell["arm"] and not r["warmup"]}
        assert sorted(r["category"] for r in rendered) == sorted(categories) and len(categories) > 1
        for r in rendered:
            (content,) = [m["content"] for m in fitted[r["prompt_id"]]["messages"] if m["role"] == "user"]
            # the fitted message, as sent, inside the template's own text
            assert r["via"] == "/apply-template" and content in r["text"] and len(r["text"]) > len(content)
    render_report(tmp_path / "run", ("md",))
    md = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "## Rendered prompts" in md and md.count(": prompt short-") == 3
    assert "Rendered differently" not in md  # the n-gram arm's flags leave the template alone
