"""The demo's real-model matrix: real-text prompts that repeat and that do not, n-gram arms."""

from __future__ import annotations

from pathlib import Path

from specbench.config import load_matrix
from specbench.demo import write_real_matrix
from specbench.lab.real import GEMMA3_270M, template_path
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
