"""Failures are visible and a run can be finished: start-up retries, --retry-failed, a hung
engine (a real llama-server stopped with SIGSTOP), exit codes."""

from __future__ import annotations

import hashlib
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from specbench import api
from specbench.engines.process import error_line
from specbench.errors import ArmStartError, ModelChangedError
from specbench.run.launch import START_ATTEMPTS
from specbench.run.progress import restart_text
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.procs import engines_tagged, kill_all, specbench, tag, tagged_matrix


def _store_with(tmp_path: Path, arms: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    store = RunStore(tmp_path / "run")
    store.create({"matrix": {"arms": {a: [] for a in arms}}, "arms": arms}, resume=False)
    for rec in records:
        store.append_record({"prompt_id": "p", "repeat": 0, "warmup": False, "error": None, **rec})
    store.close()
    return tmp_path / "run"


def test_a_failed_arm_and_an_arm_without_one_success_are_problems(tmp_path: Path) -> None:
    out = _store_with(
        tmp_path,
        {"a": {"status": "ok"}, "b": {"status": "failed", "error": "engine did not start: boom"}},
        [{"arm": "a", "error": {"type": "ConnectError", "message": "refused"}}],
    )
    assert api.run_problems(out) == [
        "arm b failed: engine did not start: boom",
        "arm a: none of its 1 requests succeeded (first: refused)",
    ]


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"status": "failed", "failure": "start", "error": "engine did not start with model m: x"}, 4),
        ({"status": "failed", "error": "engine did not start: x"}, 4),  # a manifest from before `failure`
        ({"status": "failed", "failure": "crash", "error": "engine crashed twice in repeat 1"}, 6),
        ({"status": "failed", "failure": "hang", "error": "engine stopped answering twice in repeat 0"}, 6),
    ],
)
def test_an_arm_whose_engine_would_not_start_ends_the_run_with_exit_4(
    tmp_path: Path, entry: dict[str, Any], code: int
) -> None:
    """Issue 44: docs/faults.md's 4 (an engine would not start), not 6, also when the arm has
    records from an earlier launch (here: one success); a crash or a hang is still 6."""
    out = _store_with(tmp_path, {"a": {"status": "ok"}, "b": entry}, [{"arm": "a"}, {"arm": "b"}])
    error = api.run_incomplete(out)
    assert error is not None and error.exit_code == code
    assert str(error) == f"run incomplete: arm b failed: {entry['error']}"
    assert isinstance(error, ArmStartError) == (code == 4)


def test_a_healthy_run_has_no_problems(tmp_path: Path) -> None:
    records = [{"arm": "a"}, {"arm": "a", "error": {"message": "x"}}]
    out = _store_with(tmp_path, {"a": {"status": "ok"}}, records)
    assert api.run_problems(out) == [] and api.run_incomplete(out) is None


def test_retry_failed_makes_failed_arms_runnable_and_keeps_their_errors(tmp_path: Path) -> None:
    out = _store_with(tmp_path, {"b": {"status": "failed", "error": "boom"}}, [])
    store = RunStore(out)
    store.create({"matrix": {"arms": {"b": []}}}, resume=True)
    assert store.retry_failed() == ["b"]
    store.close()
    entry = RunStore(out).manifest()["arms"]["b"]
    assert entry["status"] == "retrying" and entry["previous_errors"] == ["boom"]


def test_the_engines_own_error_line_is_found_past_the_header(tmp_path: Path) -> None:
    log = tmp_path / "arm.log"
    log.write_text("old: error: stale\n===== specbench: x --bad\nusage: x\nerror: invalid argument: --bad\n")
    assert error_line(log, len("old: error: stale\n")) == "error: invalid argument: --bad"


pytestmark_engine = pytest.mark.engine


@pytestmark_engine
def test_an_engine_that_cannot_start_is_retried_then_resumed_with_retry_failed(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    name = tag()
    draft = tmp_path / "draft.gguf"
    shutil.copyfile(dense_pair.draft, draft)
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=1, forward_probe=False)
    raw = yaml.safe_load(matrix.read_text())
    raw["arms"]["draft4"] = ["--alias", name, "-md", "draft.gguf", "--spec-type", "draft-simple"]
    matrix.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    try:
        runner = api.prepare_run(matrix, out)
        draft.unlink()  # gone between the check and the launch: the engine dies before /health
        runner.run()
        entry = RunStore(out).manifest()["arms"]["draft4"]
        assert entry["status"] == "failed" and len(entry["start_failures"]) == START_ATTEMPTS
        said = entry["error"].split("before becoming healthy: ", 1)[1]
        assert "draft.gguf" in said  # the engine's own error line, not its usage text
        shutil.copyfile(dense_pair.draft, draft)  # the cause is fixed, but the arm stays failed
        again = specbench("run", str(matrix), "--out", str(out), "--resume")
        output = again.communicate(timeout=300)[0]
        # still an engine that would not start (exit 4): --resume alone does not launch it again
        assert again.returncode == 4, output
        loads = f"with model {dense_pair.target} and draft {draft}"
        last = output.strip().splitlines()[-1]
        assert last.startswith(f"error: run incomplete: arm draft4 failed: engine did not start {loads}: ")
        fixed = specbench("run", str(matrix), "--out", str(out), "--resume", "--retry-failed")
        output = fixed.communicate(timeout=300)[0]
    finally:
        kill_all(name)
    assert fixed.returncode == 0, output
    store = RunStore(out)
    assert len(store.completed()) == 6 and store.manifest()["arms"]["draft4"]["status"] == "ok"


@pytestmark_engine
def test_a_hung_engine_fails_the_cell_fast_and_the_restart_finishes_it(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """SIGSTOP: the real llama-server keeps its port open and answers nothing (a hang)."""
    name = tag()
    matrix = tagged_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        name,
        repeats=1,
        request_timeout=3,
        workload={"suite": "natural", "max_tokens": 24, "prompts": 4, "prompt_file": "prompts.jsonl"},
    )
    runner = api.prepare_run(matrix, tmp_path / "run")
    stopped: list[int] = []
    restarts: list[str] = []

    def stop_after_first(event: str, info: dict[str, Any]) -> None:
        if event == "restart":
            restarts.append(restart_text(info))  # what the console says
        if event == "request" and not info["warmup"] and not stopped:
            victim = engines_tagged(name)[0]
            stopped.append(victim.pid)
            victim.send_signal(signal.SIGSTOP)

    runner.observe = stop_after_first
    try:
        runner.run()
    finally:
        for proc in engines_tagged(name):
            proc.send_signal(signal.SIGCONT)
        orphans = kill_all(name)
    store = RunStore(tmp_path / "run")
    timeouts = [r for r in store.records() if r["error"]]
    assert stopped and orphans == 0
    assert len(store.completed()) == 4
    assert len(timeouts) == 1 and timeouts[0]["error"]["message"] == "no response within 3 s"
    first, second = store.cells()
    assert first["hung"].startswith("no /health answer") and "forward_probe" not in first
    assert second["attempt"] == 1 and "hung" not in second
    # specbench stopped it (SIGTERM cannot end a stopped process: SIGKILL, -9): not "engine exited"
    assert len(restarts) == 1 and "engine stopped answering (no /health answer" in restarts[0]
    assert "specbench stopped it (exit code -9)" in restarts[0]


def _unloadable(source: Path, dest: Path) -> Path:
    """A copy of a lab model that reads as a GGUF, whole, but names an architecture llama.cpp
    does not know: the engine exits at load ("unknown model architecture"), after every check."""
    data = source.read_bytes()
    at = data.index(b"llama", data.index(b"general.architecture"))
    dest.write_bytes(data[:at] + b"llamx" + data[at + 5 :])
    return dest


@pytestmark_engine
def test_a_model_the_engine_cannot_load_exits_4_naming_the_file_and_keeps_the_rest(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """Issue 44: was exit 6 ("an arm failed"), and the last line quoted llama.cpp's "error loading
    model" without the file."""
    name = tag()
    draft = _unloadable(dense_pair.draft, tmp_path / "draft.gguf")
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=1, forward_probe=False)
    raw = yaml.safe_load(matrix.read_text())
    raw["arms"]["draft4"] = ["--alias", name, "-md", str(draft), "--spec-type", "draft-simple"]
    matrix.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    try:
        proc = specbench("run", str(matrix), "--out", str(out), "--no-report")
        output = proc.communicate(timeout=300)[0]
    finally:
        orphans = kill_all(name)
    assert proc.returncode == 4 and orphans == 0, output
    last = output.strip().splitlines()[-1]
    assert last.startswith(
        f"error: run incomplete: arm draft4 failed: engine did not start with model {dense_pair.target} "
        f"and draft {draft}: exited with code 1 before becoming healthy: "
    )
    assert "unknown model architecture: 'llamx'" in last
    store = RunStore(out)  # what ran is kept, and the run can be continued
    assert {arm for arm, _, _ in store.completed()} == {"baseline"} and len(store.completed()) == 3
    assert store.manifest()["arms"]["draft4"]["failure"] == "start"


@pytestmark_engine
def test_a_target_cut_short_between_launches_stops_the_run_with_exit_5_and_measured_launches_kept(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """A file that changes after the check (docs/faults.md: checks are of the input, not of the
    future): cut short before the second round, after both arms measured it whole. Before issue
    44's re-check llama.cpp refused it at load (exit 4); going on with the file fixed would have
    put a second model's launches beside the first's. Now the next launch is not made: exit 5,
    naming the file, what was measured with it and what is there now."""
    name = tag()
    target = tmp_path / "target.gguf"
    shutil.copyfile(dense_pair.target, target)
    whole = target.stat().st_size
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=2, forward_probe=False)
    raw = yaml.safe_load(matrix.read_text())
    raw["model"] = str(target)
    raw["arms"]["draft4"] = ["--alias", name, "--spec-type", "ngram-simple"]
    matrix.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    runner = api.prepare_run(matrix, out)

    def cut_before_round_two(event: str, info: dict[str, Any]) -> None:
        if event == "cell" and info["repeat"] == 1 and target.stat().st_size > 4096:
            with target.open("r+b") as fh:
                fh.truncate(target.stat().st_size // 2)

    runner.observe = cut_before_round_two
    try:
        with pytest.raises(ModelChangedError) as err:
            runner.run()
    finally:
        orphans = kill_all(name)
    assert err.value.exit_code == 5 and orphans == 0
    assert str(err.value).startswith(
        f"model {target} changed since this run recorded it (sha256 {_sha(dense_pair.target)[:12]}…, "
        f"{whole:,} bytes; now sha256 {_sha(target)[:12]}…, {whole // 2:,} bytes), and 2 launches of "
        "this run measured the old file: "
    )
    store = RunStore(out)
    assert {(arm, repeat) for arm, _, repeat in store.completed()} == {("baseline", 0), ("draft4", 0)}
    assert [c["model_files"][0]["sha256"] for c in store.cells()] == [_sha(dense_pair.target)] * 2
    assert store.env()["model"]["sha256"] == _sha(dense_pair.target)  # what was measured
    assert all(entry.get("status") != "failed" for entry in store.manifest()["arms"].values())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
