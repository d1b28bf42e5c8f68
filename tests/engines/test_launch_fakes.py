"""Launch mode end to end for vLLM and SGLang, against FAKE engine processes (tests/fakes/bin).

``specbench run`` launches ``tests/fakes/bin/fake-vllm`` or ``fake-sglang-python`` exactly as it
would launch ``vllm`` or SGLang's Python (engines/vllm.py, engines/sglang.py); the fakes serve the
documented protocol (tests/fakes/fake_launcher.py). The run must produce the records, cells and
findings a llama.cpp run produces. No GPU, no vLLM, no SGLang and no llama-server are needed.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from typer.testing import CliRunner

from specbench import analysis
from specbench.analysis.evidence import acceptance
from specbench.cli import app
from specbench.engines.process import ServerProcess, free_port
from specbench.engines.sglang import SglangEngine
from specbench.engines.sglang import parse_log_acceptance as sglang_log
from specbench.engines.vllm import VllmEngine
from specbench.store.rundir import RunStore
from tests.fakes import fake_sglang as fs
from tests.fakes import fake_vllm as fv
from tests.fakes.fake_launcher import CUDAGRAPH_DOWNGRADE, IGNORE_SPECULATION
from tests.support.paths import FAKE_BIN

pytestmark = pytest.mark.fake_engine

BIN = FAKE_BIN
FAKE_VLLM = BIN / "fake-vllm"
FAKE_SGLANG_PYTHON = BIN / "fake-sglang-python"

# The keys of a record and of a cell that a real llama-server run (0c1e570, `specbench demo`) wrote.
LLAMACPP_RECORD_KEYS = {
    *("arm", "category", "chunks", "concurrency", "error", "model", "phase", "prompt_id", "repeat"),
    *("request", "schema_version", "seq", "started_at", "system_fingerprint", "t_done_ns", "t_end_ns"),
    *("t_headers_ns", "timings", "usage", "wall_start", "warmup", "workload"),
}
LLAMACPP_CELL_KEYS = {
    *("alive_at_end", "arm", "attempt", "base_url", "ended_at", "log_lines", "metrics_after"),
    *("metrics_before", "pid", "repeat", "schema_version", "server", "started_at"),
}
# Raw response fields kept as the engine sent them, so they differ: llama.cpp's `timings` and
# `system_fingerprint`, vLLM's per-request `metrics` (vLLM per-request metrics). Everything else is shared.
ENGINE_FIELDS = {"timings", "system_fingerprint", "metrics"}
SHARED_RECORD_KEYS = LLAMACPP_RECORD_KEYS - ENGINE_FIELDS

PROMPTS = [
    {"id": "sea", "category": "chat", "prompt": "Tell me about the sea."},
    {"id": "sort", "category": "coding", "prompt": "Write a sort function."},
]
MTP = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}']
EAGLE3 = [
    *("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", fs.DRAFT),
    *("--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
]
# Per engine: binary, model, a non-speculative flag with a value, the speculative arm's flags.
ENGINES: dict[str, tuple[Path, str, list[str], list[str]]] = {
    "vllm": (FAKE_VLLM, fv.MODEL, ["--max-num-seqs", "8"], MTP),
    "sglang": (FAKE_SGLANG_PYTHON, fs.MODEL, ["--max-running-requests", "8"], EAGLE3),
}
# Findings that mean the measurement is wrong, as opposed to noisy (the fakes' timings are noise).
WRONG = {"SILENT_FALLBACK", "CONFOUND", "ACCEPTANCE_ARTEFACT", "OUTPUT_DRIFT", "TOOLCALL_MISMATCH"}


@pytest.fixture(autouse=True)
def fake_python(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fakes run on this interpreter; `specbench run` installs its own SIGTERM handler in
    this process (the Ctrl-C path), so pytest's is put back afterwards."""
    monkeypatch.setenv("SPECBENCH_FAKE_PYTHON", sys.executable)
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def write_matrix(
    folder: Path, engine: str, arms: dict[str, list[str]], common: list[str], **extra: Any
) -> Path:
    binary, model, _, _ = ENGINES[engine]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    matrix = {
        "engine": engine,
        "model": model,
        "engine_binary": str(binary),
        "common_args": common,
        "arms": arms,
        "workload": {"suite": "natural", "max_tokens": 16, "prompts": 2, "prompt_file": "prompts.jsonl"},
        "repeats": 2,
        "warmup": 1,
        "startup_timeout": 60,
        **extra,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def run(matrix: Path, out: Path) -> analysis.RunData:
    """`specbench run`, as a user types it; then the run directory as analysis reads it."""
    cli("run", str(matrix), "--out", str(out))
    return analysis.load_run(out)


def codes(run: analysis.RunData) -> dict[str, set[tuple[str, ...]]]:
    out: dict[str, set[tuple[str, ...]]] = {}
    for f in analysis.judge(run):
        out.setdefault(f.code, set()).add(f.arms)
    return out


def evidence(run: analysis.RunData, code: str) -> str:
    return " ".join(f.evidence for f in analysis.judge(run) if f.code == code)


def spec_delta(cell: dict[str, Any], key: str) -> float:
    after, before = cell["metrics_after"]["spec"], cell["metrics_before"]["spec"]
    return float(after[key] - before.get(key, 0.0))


def assert_engines_stopped(out: Path, arms: list[str]) -> None:
    """Every launched fake was reaped and had exited through its SIGTERM handler."""
    store = RunStore(out)
    assert all(not psutil.pid_exists(c["pid"]) for c in store.cells())
    for arm in arms:
        launches = sum(1 for c in store.cells() if c["arm"] == arm)
        assert store.log_path(arm).read_text().count("Shutting down (SIGTERM)") == launches


def assert_llamacpp_shaped(store: RunStore) -> None:
    """Records have a llama.cpp run's fields (but for ENGINE_FIELDS); cells have at least its
    fields (the runner may add keys for every engine, e.g. to baseline cells only)."""
    records, cells = store.records(), store.cells()
    assert records and all(r["error"] is None for r in records)
    assert all(set(r) - ENGINE_FIELDS == SHARED_RECORD_KEYS for r in records)
    assert cells and all(set(c) >= LLAMACPP_CELL_KEYS for c in cells)


# -- vLLM --------------------------------------------------------------------------------------
def test_vllm_matrix_runs_like_a_llamacpp_one(tmp_path: Path) -> None:
    # --per-request-spec-decode-metrics belongs to speculative arms only: a real vLLM 0.32 refuses to
    # start without --speculative-config (vllm/config/vllm.py), so it is never in common_args.
    per_request = ["--per-request-spec-decode-metrics", "summary"]
    arms = {"baseline": [], "mtp_k3": [*MTP, *per_request]}
    matrix = write_matrix(tmp_path, "vllm", arms, ["--max-num-seqs", "8"])
    out = tmp_path / "run"
    run_data = run(matrix, out)
    store = RunStore(out)
    assert_llamacpp_shaped(store)
    measured = [r for r in store.records() if not r["warmup"]]
    assert len(measured) == 2 * 2 * 2  # arms × prompts × repeats
    assert {r["arm"] for r in measured if "metrics" in r} == {"mtp_k3"}  # per-request spec metrics
    cells = store.cells()
    # interleaved: each round launches both arms once, the second round in the first's reverse
    rounds = [[c["arm"] for c in cells if c["repeat"] == r] for r in (0, 1)]
    assert sorted(rounds[0]) == ["baseline", "mtp_k3"] and rounds[1] == rounds[0][::-1]
    assert [c["repeat"] for c in cells] == [0, 0, 1, 1]
    for cell in cells:
        if cell["arm"] == "baseline":  # no speculative config: no spec counters at all (vLLM metrics docs)
            assert cell["metrics_after"]["spec"] == {} and cell["server"]["spec_metrics_present"] is False
            assert cell["log_lines"] == []
            continue
        assert cell["server"]["spec_metrics_present"] is True
        # Deltas cover the 2 measured requests, not the warm-up (scraped after it).
        assert spec_delta(cell, "drafts") == 2 * fv.DRAFTS
        assert spec_delta(cell, "accepted") == 2 * fv.ACCEPTED
        assert spec_delta(cell, "accepted_pos_0") == 2 * fv.PER_POS[0]
        # Acceptance lines are read from where the measured requests began: the warm-up's is out.
        assert sum("SpecDecoding metrics:" in ln for ln in cell["log_lines"]) == 2
    command = store.manifest()["arms"]["mtp_k3"]["command"]
    assert command[:3] == [str(FAKE_VLLM), "serve", fv.MODEL] and MTP[1] in command
    summary = analysis.arm_summary(run_data).set_index("arm")
    assert summary.loc["mtp_k3", "acceptance"] == pytest.approx(fv.ACCEPTED / fv.DRAFT_TOKENS)
    sources = acceptance.acceptance_sources("mtp_k3", run_data.df, run_data.cells, VllmEngine())
    assert set(sources) == {"timings", "metrics", "log"}  # three sources, and they agree:
    assert sources["log"]["partial"] and not sources["metrics"]["partial"]  # vLLM's log: an aggregate
    assert not WRONG & set(codes(run_data))
    cli("report", str(out), "--format", "json")
    written = json.loads((out / "report" / "findings.json").read_text())
    assert [f["code"] for f in written["findings"]] == [f.code for f in analysis.judge(run_data)]
    assert {row["arm"] for row in written["summary"]} == {"baseline", "mtp_k3"}
    assert_engines_stopped(out, ["baseline", "mtp_k3"])


def test_a_cuda_graph_downgrade_is_a_silent_fallback(tmp_path: Path) -> None:
    # No --per-request-spec-decode-metrics: draft counts per request are unknown, not zero.
    matrix = write_matrix(
        tmp_path,
        "vllm",
        {"baseline": [], "mtp_k3": MTP},
        ["--max-num-seqs", "8"],
        repeats=1,
        env={CUDAGRAPH_DOWNGRADE: "1"},
    )
    run_data = run(matrix, tmp_path / "run")
    assert codes(run_data)["SILENT_FALLBACK"] == {("mtp_k3",)}
    found = evidence(run_data, "SILENT_FALLBACK")
    assert "is not supported with spec-decode" in found and "no drafting" not in found
    assert "cudagraph_mode" not in RunStore(tmp_path / "run").log_path("baseline").read_text()


# -- SGLang ------------------------------------------------------------------------------------
def test_sglang_matrix_runs_like_a_llamacpp_one(tmp_path: Path) -> None:
    common = ["--mem-fraction-static", "0.8", "--disable-radix-cache"]
    matrix = write_matrix(tmp_path, "sglang", {"baseline": [], "eagle3": EAGLE3}, common)
    out = tmp_path / "run"
    run_data = run(matrix, out)
    store = RunStore(out)
    assert_llamacpp_shaped(store)
    assert len([r for r in store.records() if not r["warmup"]]) == 2 * 2 * 2
    for cell in store.cells():
        algorithm = cell["server"]["speculative"]["speculative_algorithm"]
        gauges = cell["metrics_after"]["spec"]
        assert "drafts" not in gauges  # SGLang has gauges, never counters (SGLang docs)
        if cell["arm"] == "baseline":
            assert algorithm is None and gauges["accept_length_gauge"] == 0.0
            assert cell["log_lines"] == []  # decode lines carry no accept len without speculation
            continue
        assert algorithm == "EAGLE3" and gauges["accept_length_gauge"] in fs.ACCEPT_LENGTHS
        lengths = [(sglang_log(ln) or {}).get("mean_acceptance_length") for ln in cell["log_lines"]]
        assert len(lengths) == 2 and set(lengths) <= set(fs.ACCEPT_LENGTHS)  # measured only
    command = store.manifest()["arms"]["eagle3"]["command"]
    assert command[:5] == [str(FAKE_SGLANG_PYTHON), "-m", "sglang.launch_server", "--model-path", fs.MODEL]
    # No per-request draft counts on SGLang: that must not read as "no drafting".
    assert not WRONG & set(codes(run_data))
    cli("report", str(out), "--format", "json")
    assert (out / "report" / "findings.json").is_file()
    assert_engines_stopped(out, ["baseline", "eagle3"])


# -- both engines ------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_speculative_arm_with_another_engine_flag_is_a_confound(engine: str, tmp_path: Path) -> None:
    _, _, flag, spec = ENGINES[engine]
    changed = [flag[0], "4"]
    arms = {"baseline": flag, "spec": [*changed, *spec]}
    run_data = run(write_matrix(tmp_path, engine, arms, [], repeats=1, warmup=0), tmp_path / "run")
    assert codes(run_data)["CONFOUND"] == {("baseline", "spec")}
    assert flag[0] in evidence(run_data, "CONFOUND")
    assert "SILENT_FALLBACK" not in codes(run_data)


@pytest.mark.parametrize(
    ("engine", "why"),
    [
        ("vllm", "/metrics has no vllm:spec_decode counters"),
        ("sglang", "speculative_algorithm is None"),
    ],
)
def test_speculation_that_did_not_take_is_a_silent_fallback(engine: str, why: str, tmp_path: Path) -> None:
    _, _, flag, spec = ENGINES[engine]
    arms = {"baseline": [], "spec": spec}
    matrix = write_matrix(tmp_path, engine, arms, flag, repeats=1, warmup=0, env={IGNORE_SPECULATION: "1"})
    run_data = run(matrix, tmp_path / "run")
    assert codes(run_data)["SILENT_FALLBACK"] == {("spec",)}
    assert why in evidence(run_data, "SILENT_FALLBACK")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_dry_run_prints_each_arms_exact_command(engine: str, tmp_path: Path) -> None:
    binary, model, flag, spec = ENGINES[engine]
    matrix = write_matrix(tmp_path, engine, {"baseline": [], "spec": spec}, flag)
    lines = cli("run", str(matrix), "--dry-run").split("commands:\n", 1)[1].splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines] == ["baseline", "spec"]
    baseline, speculative = (shlex.split(ln.split(": ", 1)[1]) for ln in lines)  # pastes into a shell
    kind = VllmEngine(str(binary)) if engine == "vllm" else SglangEngine(str(binary))
    assert baseline == kind.command(model, flag, "127.0.0.1", 0)
    assert speculative == kind.command(model, [*flag, *spec], "127.0.0.1", 0)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_fake_engines_serve_and_exit_on_sigterm(engine: str, tmp_path: Path) -> None:
    port = free_port()
    kind = VllmEngine(str(FAKE_VLLM)) if engine == "vllm" else SglangEngine(str(FAKE_SGLANG_PYTHON))
    argv = kind.command(ENGINES[engine][1], [], "127.0.0.1", port)
    server = ServerProcess(argv, tmp_path / "engine.log")
    server.start(f"http://127.0.0.1:{port}{kind.health_path}", timeout=60)
    assert server.alive()
    assert server.stop() == 0  # its SIGTERM handler ran; SIGKILL after the grace period gives -9
