"""The demo's real-model matrix: real-text prompts that repeat and that do not, n-gram arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.cli.demo import write_real_matrix
from specbench.errors import ConfigError
from specbench.lab.real import GEMMA3_270M, template_path
from specbench.matrix.load import load_matrix
from specbench.workloads.suites import build_requests


def test_real_matrix_loads_with_its_template_and_prompts(tmp_path: Path) -> None:
    model = tmp_path / "gemma.gguf"
    model.write_bytes(b"GGUF")  # load_matrix checks the file exists, nothing more
    write_real_matrix(tmp_path, GEMMA3_270M, model, repeats=3)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert list(matrix.arms) == ["baseline", "ngram-simple", "ngram-mod"]
    assert str(template_path(GEMMA3_270M)) in matrix.common_args
    requests, _, _ = build_requests(matrix, tmp_path)
    categories = {r.category for r in requests}
    assert {"code-edit", "quote", "structured", "prose"} <= categories
    # Sent as written: one user message each, no instructions added around the raw text.
    assert all(len(r.messages) == 1 for r in requests)


def test_the_stored_matrix_names_the_bundled_template_and_runs_from_a_copy(tmp_path: Path) -> None:
    """The demo's matrix.yaml names its template ``specbench:plain.jinja``, not the absolute path
    of this clone's ``src/``: copied to another folder it loads with the same template."""
    model = tmp_path / "gemma.gguf"
    model.write_bytes(b"GGUF")
    write_real_matrix(tmp_path, GEMMA3_270M, model, repeats=3)
    text = (tmp_path / "matrix.yaml").read_text()
    assert "specbench:plain.jinja" in text and "/templates/" not in text
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    (elsewhere / "matrix.yaml").write_text(text)
    matrix = load_matrix(elsewhere / "matrix.yaml")
    assert str(template_path(GEMMA3_270M)) in matrix.common_args


def test_an_unknown_bundled_template_is_one_line_naming_the_ones_there_are(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "matrix.yaml").write_text(
        "model: m.gguf\narms: {baseline: [--jinja, --chat-template-file, 'specbench:chatml.jinja']}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_matrix(tmp_path / "matrix.yaml")
    msg = str(err.value)
    assert "arms.baseline: --chat-template-file" in msg and "specbench:plain.jinja" in msg
    assert "\n" not in msg
