"""No llama-server argv the repository itself ships is refused by the flag check.

Every llama.cpp matrix in ``examples/``, the demo's arms (lab pair and real model) and the flags
specbench adds itself are checked against the pinned build's ``--help``
(``data/llama-server-help.txt``): a flag check that refuses one of them would stop a user's first
run before anything launches.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specbench.cli import demo
from specbench.engines.argtable import check_flags
from specbench.engines.helpparse import parse_llama_help
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.lab.real import REAL_MODELS
from tests.support.paths import EXAMPLES

HELP = Path(__file__).parent / "data" / "llama-server-help.txt"
TABLE = parse_llama_help(HELP.read_text())


def _llama_matrices() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text())["engine"] == "llamacpp")


def test_the_examples_hold_llama_cpp_matrices() -> None:
    assert len(_llama_matrices()) >= 3


@pytest.mark.parametrize("path", _llama_matrices(), ids=lambda p: p.name)
def test_every_llama_cpp_example_passes_the_flag_check(path: Path) -> None:
    matrix = yaml.safe_load(path.read_text())
    check_flags(TABLE, matrix.get("common_args") or [], matrix["arms"])


def test_the_demo_s_matrices_pass_the_flag_check(tmp_path: Path) -> None:
    demo.write_matrix(tmp_path / "lab.yaml", tmp_path, repeats=1)
    matrices = [yaml.safe_load((tmp_path / "lab.yaml").read_text())]
    for model in REAL_MODELS.values():
        folder = tmp_path / model.name
        folder.mkdir()
        demo.write_real_matrix(folder, model, folder / "model.gguf", repeats=1)
        matrices.append(yaml.safe_load((folder / "matrix.yaml").read_text()))
    for matrix in matrices:
        check_flags(TABLE, matrix["common_args"], matrix["arms"])


def test_the_flags_specbench_adds_pass_the_flag_check() -> None:
    command = LlamaCppEngine(Path("llama-server")).command("m.gguf", [], "127.0.0.1", 8080)
    check_flags(TABLE, command[1:], {})
