"""Attach mode as a first-class arm (issue 15 item 4), on real llama-servers the test starts.

Two servers of the lab pair, a baseline and a draft arm, are attached one after the other into
one run directory: they must read as one comparison with acceptance, speculation checks and the
engine recorded as llama.cpp with its build. A port where nothing listens is an error.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench import api
from specbench.analysis import arm_acceptance, comparisons, judge, load_run
from specbench.cli import app
from specbench.engines.process import free_port
from specbench.errors import ConfigError, EngineError
from tests.support.lab import Pair
from tests.support.matrices import SHORT_PROMPTS, draft4
from tests.support.serve import serve

pytestmark = pytest.mark.engine


def attach_matrix(folder: Path, arms: dict[str, list[str]] | None = None) -> Path:
    """A matrix that launches nothing: the servers run elsewhere (here: started by the test)."""
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix = {
        "engine": "openai",
        "workload": {"suite": "natural", "max_tokens": 24, "prompts": 3, "prompt_file": "prompts.jsonl"},
        "repeats": 1,
        "warmup": 1,
        **({"arms": arms} if arms else {}),
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def test_two_attached_servers_are_one_comparison(llama_server: Path, moe_pair: Pair, tmp_path: Path) -> None:
    matrix, out = attach_matrix(tmp_path), tmp_path / "run"
    with serve(llama_server, moe_pair.target, [], tmp_path / "base.log") as base:
        api.prepare_run(matrix, out, attach=base.url, arm="baseline").run()
    flags = draft4(moe_pair)
    with serve(llama_server, moe_pair.target, flags, tmp_path / "draft.log") as draft:
        runner = api.prepare_run(
            matrix, out, resume=True, attach=draft.url, arm="draft4", arm_args=tuple(flags)
        )
        runner.run()
        with pytest.raises(ConfigError, match="--arm draft4"):  # one arm name, other flags: refused
            api.prepare_run(matrix, out, resume=True, attach=draft.url, arm="draft4", arm_args=())
    run = load_run(out)
    assert run.arms == ["baseline", "draft4"] and run.baseline == "baseline"
    env = json.loads((out / "env.json").read_text())["engine"]
    assert env["kind"] == "llamacpp" and env["version"].startswith("b"), env
    acceptance, source = arm_acceptance(run, "draft4")
    assert 0 < acceptance <= 1, (acceptance, source)
    assert "draft4" in comparisons(run)  # the speedup over the attached baseline
    codes = {f.code for f in judge(run)}
    assert "SILENT_FALLBACK" not in codes and "CONFOUND" not in codes, codes


def test_an_attached_arm_that_does_not_speculate_is_a_fallback(
    llama_server: Path, moe_pair: Pair, tmp_path: Path
) -> None:
    # The user says the server drafts; it was started without --spec-type (llama.cpp loads -md
    # and never drafts): the checks of a launched arm see it.
    said = ["--spec-type", "draft-simple", "--spec-draft-n-max", "4"]
    matrix = attach_matrix(tmp_path, {"baseline": [], "draft4": said})
    with serve(llama_server, moe_pair.target, [], tmp_path / "s.log") as server:
        api.prepare_run(matrix, tmp_path / "run", attach=server.url, arm="draft4").run()
    assert "SILENT_FALLBACK" in {f.code for f in judge(load_run(tmp_path / "run"))}


def test_nothing_listening_is_an_error(tmp_path: Path) -> None:
    matrix, url = attach_matrix(tmp_path), f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match="nothing answers"):
        api.prepare_run(matrix, tmp_path / "run", attach=url, arm="a")
    args = ["run", str(matrix), "--out", str(tmp_path / "r2"), "--attach", url, "--arm-args", "-x"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == EngineError.exit_code
    assert len(result.output.strip().splitlines()) == 1 and url in result.output, result.output


def test_arm_args_need_attach(tmp_path: Path) -> None:
    args = ["run", str(attach_matrix(tmp_path)), "--arm-args", shlex.join(["--spec-type", "x"])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--arm-args" in result.output
