"""The servers' own reports decide CONFOUND, on the real llama-server (lab model).

The baseline sets no context size (llama.cpp then takes the model's own, 8192 for the lab
target); one arm writes ``-c 8192`` and one ``-c 4096``. By flags alone both differ from the
baseline; ``/props`` says the first runs with the baseline's context and the second does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import api
from specbench.analysis.findings import confound
from specbench.analysis.rundata import load_run
from tests.support.lab import Pair
from tests.support.matrices import write_matrix

pytestmark = pytest.mark.engine
NGRAM = ["--spec-type", "ngram-mod"]


def test_props_n_ctx_decides_an_explicit_context_against_the_default(
    tmp_path: Path, llama_server: Path, dense_pair: Pair
) -> None:
    arms = {"baseline": [], "same": ["-c", "8192", *NGRAM], "smaller": ["-c", "4096", *NGRAM]}
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        arms,
        common_args=["-np", "1", "-t", "1"],
        repeats=1,
        warmup=0,
        forward_probe=False,
    )
    run = load_run(api.run_matrix(matrix, tmp_path / "run"))
    assert {c["server"]["n_ctx"] for c in run.cells if c["arm"] != "smaller"} == {8192}
    found = confound.confounds(
        {a: run.arm_args(a) for a in run.arms}, run.baseline, run.engine, cells=run.cells
    )
    assert [f.arms for f in found] == [("baseline", "smaller")]
    assert "--ctx-size (written -c): 4096 vs not set (the engine's default) (the servers report /props " in (
        found[0].evidence
    )
    assert "n_ctx = 4096 per slot, total_slots = 1 vs /props n_ctx = 8192 per slot" in found[0].evidence
