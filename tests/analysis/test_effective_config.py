"""CONFOUND compares arms by effective configuration, and the servers' own reports decide.

Regression (issue 27): an arm adding ``--ctx-size 2048`` on top of the common ``-c 2048``, and one
adding ``--threads 1`` on top of ``-t 1``, each got a CONFOUND error although every server of every
arm logged ``n_ctx_slot = 2048`` and ``n_threads = 1``: the check compared the arms' own argument
lists by spelling. The engine's table here is read from the stored ``llama-server --help`` of the
pinned build (tests/engines/data), printed by a fake binary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.findings import confound
from specbench.analysis.findings.judge import judge
from specbench.analysis.metrics import frame
from specbench.analysis.rundata import RunData, load_run
from specbench.engines import argstore, engine_for
from specbench.engines.argtable import ArgTable
from specbench.engines.helpparse import parse_llama_help
from specbench.engines.llamacpp import LlamaCppEngine
from tests.support import synth
from tests.support.paths import LLAMA_HELP

HELP = LLAMA_HELP
COMMON = ["-c", "2048", "-t", "1", "-np", "1"]
NGRAM = ["--spec-type", "ngram-mod"]


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LlamaCppEngine:
    """llama.cpp with the pinned build's table; also what a finished run is read with."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\ncat "{HELP}"\n')
    binary.chmod(0o755)
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", str(binary))
    return LlamaCppEngine(binary)


def run_data(
    common: list[str], arms: dict[str, list[str]], cells: list[dict[str, Any]] | None = None
) -> RunData:
    matrix = {"engine": "llamacpp", "model": "m.gguf", "common_args": common, "arms": arms}
    return RunData(manifest={"matrix": matrix}, records=[], cells=cells or [], df=frame([]))


def confound_codes(run: RunData) -> list[tuple[str, ...]]:
    return [f.arms for f in judge(run) if f.code == "CONFOUND"]


@pytest.mark.usefixtures("engine")
def test_respelt_settings_are_no_confound() -> None:
    arms = {
        "baseline": [],
        "ctx": ["--ctx-size", "2048", *NGRAM],  # on top of the common -c 2048
        "threads": ["--threads", "1", *NGRAM],  # on top of the common -t 1
        "underscore": ["--ctx_size", "2048", "--parallel", "1", *NGRAM],
        "repeated": ["-c", "4096", "-c", "2048", *NGRAM],  # the last one wins
    }
    assert confound_codes(run_data(COMMON, arms)) == []


@pytest.mark.usefixtures("engine")
def test_moving_a_shared_flag_between_common_args_and_every_arm_is_no_confound() -> None:
    arms = {"baseline": ["-t", "1"], "ngram": [*NGRAM, "--threads", "1"]}
    assert confound_codes(run_data(["-c", "2048"], arms)) == []


def test_equals_spelling_is_folded(engine: LlamaCppEngine) -> None:
    # llama-server itself refuses --ctx-size=2048 (the dry run says so); compared, it is -c 2048.
    arms = {"baseline": ["-c", "2048"], "ngram": ["--ctx-size=2048", *NGRAM]}
    assert confound.confounds(arms, "baseline", engine) == []


@pytest.mark.usefixtures("engine")
def test_a_real_difference_is_still_a_confound_with_its_values() -> None:
    run = run_data(["-t", "1"], {"baseline": ["-c", "2048"], "big": ["--ctx-size", "4096", *NGRAM]})
    (found,) = [f for f in judge(run) if f.code == "CONFOUND"]
    assert found.arms == ("baseline", "big") and found.severity == "error"
    assert "--ctx-size (written -c): 4096 vs 2048 (no server report of it)" in found.evidence
    assert "aliases from llama-server --help" in found.evidence


def _cell(arm: str, n_ctx: int, threads: int | None = None) -> dict[str, Any]:
    lines = (
        [f"0.00.034.209 I cmn          init: llama threadpool init, n_threads = {threads}"] if threads else []
    )
    return {"arm": arm, "server": {"n_ctx": n_ctx, "total_slots": 1}, "log_lines": lines}


def test_the_servers_reports_decide_a_default_against_an_explicit_value(engine: LlamaCppEngine) -> None:
    """No -c in the baseline (the model's own context), -c 2048 in the arm: equal if every server
    of both arms reports the same context; a confound, with both reports, if they differ."""
    arms = {"baseline": ["-t", "1"], "ngram": ["-t", "1", "-c", "2048", *NGRAM]}
    same = [_cell("baseline", 2048), _cell("ngram", 2048), _cell("baseline", 2048), _cell("ngram", 2048)]
    assert confound.confounds(arms, "baseline", engine, cells=same) == []
    differ = [_cell("baseline", 8192), _cell("ngram", 2048)]
    (found,) = confound.confounds(arms, "baseline", engine, cells=differ)
    assert "the servers report /props n_ctx = 2048 per slot, total_slots = 1 vs /props n_ctx = 8192" in (
        found.evidence
    )
    assert confound.confounds(arms, "baseline", engine, cells=[_cell("ngram", 2048)]) != []  # one side only


def test_the_log_s_thread_count_decides_threads(engine: LlamaCppEngine) -> None:
    arms = {"baseline": [], "ngram": ["-t", "2", *NGRAM]}
    cells = [_cell("baseline", 2048, threads=2), _cell("ngram", 2048, threads=2)]
    assert confound.confounds(arms, "baseline", engine, cells=cells) == []
    cells = [_cell("baseline", 2048, threads=1), _cell("ngram", 2048, threads=2)]
    (found,) = confound.confounds(arms, "baseline", engine, cells=cells)
    assert "--threads (written -t): 2 vs not set (the engine's default)" in found.evidence
    assert "log n_threads = 2 vs log n_threads = 1" in found.evidence


@pytest.mark.usefixtures("engine")
def test_speculative_flags_by_the_help_s_own_section_are_no_confound() -> None:
    # --spec-draft-threads (-td) sits in llama-server's "speculative params" section.
    arms = {"baseline": [], "draft": ["-md", "d.gguf", "--spec-type", "draft-simple", "-td", "1"]}
    assert confound_codes(run_data(COMMON, arms)) == []


def test_without_a_table_spellings_are_compared_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", "/bin/false")  # prints no help
    arms = {"baseline": ["-c", "2048"], "ngram": ["-c", "2048", "--ctx-size", "2048", *NGRAM]}
    (found,) = confound.confounds(arms, "baseline", engine_for("llamacpp"))
    assert "the engine's argument table could not be read" in found.evidence


# -- the table stored with the run decides, not the engine installed where the report is made --
@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No llama-server anywhere; every question to the engine's ``arg_table`` is recorded."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", str(tmp_path / "no-such-llama-server"))
    asked: list[str] = []
    real = LlamaCppEngine.arg_table

    def arg_table(self: LlamaCppEngine) -> Any:
        asked.append(str(self.binary))
        return real(self)

    monkeypatch.setattr(LlamaCppEngine, "arg_table", arg_table)
    return asked


def _run_dir(root: Path, table: ArgTable | None) -> Path:
    draft = synth.Arm(args=(*synth.SPEC_ARGS, "--threads", "1"), decode_tok_s=40.0)
    arms = {"baseline": synth.Arm(args=("-t", "1")), "draft": draft}
    plan = synth.Plan(arms=arms, prompts_per_category=2, repeats=2)
    run = synth.make_run(root / "run", plan)
    (run / argstore.ARGS_FILE).write_text(argstore.dumps(table))
    return run


def test_a_stored_table_decides_with_no_engine_installed(tmp_path: Path, no_engine: list[str]) -> None:
    """Regression: the report read the argument table of whatever llama-server was installed
    where it ran; with none, ``-t 1`` vs ``--threads 1`` was a CONFOUND again. The run's own
    ``engine_args.json`` decides, and the engine is never asked."""
    run = _run_dir(tmp_path, parse_llama_help(HELP.read_text()))
    assert confound_codes(load_run(run)) == [] and no_engine == []
    (run / argstore.ARGS_FILE).unlink()  # a run made before tables were kept: the engine here is asked
    assert confound_codes(load_run(run)) == [("baseline", "draft")] and no_engine


def test_a_run_made_without_a_table_compares_spellings_wherever_it_is_read(
    tmp_path: Path, engine: LlamaCppEngine
) -> None:
    """The run had no table (its engine's help could not be read): the installed one is not used."""
    (found,) = [f for f in judge(load_run(_run_dir(tmp_path, None))) if f.code == "CONFOUND"]
    assert "--threads: 1 vs not set (the engine's default)" in found.evidence
    assert "help could not be read when the run was made (engine_args.json)" in found.evidence
