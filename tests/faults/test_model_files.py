"""Issue 44: a model file cut short (an interrupted download or copy) is a bad input, refused
with one line naming it before anything is launched or written, by ``run --dry-run`` and ``run``
alike; before, the dry run planned "CPU decode of a 10 MB model" from the first 10 MB of a file
and the run failed at llama.cpp's load, quoting it but naming no file."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import pytest
import yaml

from specbench import api
from specbench.errors import ConfigError
from specbench.matrix.load import load_matrix
from specbench.run.modelfiles import check_model_files
from tests.support.lab import Pair
from tests.support.procs import specbench


def _cut(source: Path, dest: Path, size: int) -> Path:
    shutil.copyfile(source, dest)
    with dest.open("r+b") as fh:
        fh.truncate(size)
    return dest


def _matrix(folder: Path, model: Path, arms: dict[str, list[str]]) -> Path:
    path = folder / "matrix.yaml"
    raw = {
        "model": str(model),
        "arms": arms,
        "workload": {"suite": "natural", "max_tokens": 8, "prompts": 1},
        "repeats": 1,
    }
    path.write_text(yaml.safe_dump(raw))
    return path


def _last_tensor(model: Path) -> tuple[str, int]:
    """The tensor whose data ends last, and where, as the ``gguf`` package reads the file."""
    end, name = max((t.data_offset + t.n_bytes, t.name) for t in gguf.GGUFReader(model).tensors)
    return name, end


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_target_cut_short_is_one_line_and_exit_2_before_anything_runs(
    dense_pair: Pair, tmp_path: Path, dry_run: bool
) -> None:
    half = dense_pair.target.stat().st_size // 2
    target = _cut(dense_pair.target, tmp_path / "target.gguf", half)
    matrix = _matrix(tmp_path, target, {"baseline": []})
    out = tmp_path / "run"
    proc = specbench("run", str(matrix), "--out", str(out), *(["--dry-run"] if dry_run else []))
    output = proc.communicate(timeout=120)[0]
    name, end = _last_tensor(dense_pair.target)
    assert proc.returncode == 2, output
    assert output.strip().splitlines() == [
        f"error: model: {target}: the file is cut short: its tensor data needs {end:,} bytes "
        f"(to the end of tensor '{name}'), the file has {half:,} (an interrupted download or copy?)"
    ]
    assert not out.exists()  # nothing written, nothing launched


@pytest.mark.parametrize("spelling", ["split", "joined"])
def test_a_draft_cut_short_names_the_arm_and_the_flag(
    dense_pair: Pair, tmp_path: Path, spelling: str
) -> None:
    draft = _cut(dense_pair.draft, tmp_path / "draft.gguf", dense_pair.draft.stat().st_size - 4096)
    flag = ["-md", str(draft)] if spelling == "split" else [f"--spec-draft-model={draft}"]
    matrix = _matrix(
        tmp_path, dense_pair.target, {"baseline": [], "draft4": [*flag, "--spec-type", "draft-simple"]}
    )
    name = "-md" if spelling == "split" else "--spec-draft-model"
    with pytest.raises(ConfigError, match=rf"^arms\.draft4: {name}: {draft}: the file is cut short: "):
        api.plan_run(matrix, tmp_path / "run", probe=False)


def test_a_file_cut_inside_its_header_is_refused_too(dense_pair: Pair, tmp_path: Path) -> None:
    target = _cut(dense_pair.target, tmp_path / "target.gguf", 2000)
    matrix = _matrix(tmp_path, target, {"baseline": []})
    with pytest.raises(
        ConfigError, match=rf"^model: {target}: the file ends inside its GGUF header \(2,000 bytes\)"
    ):
        api.plan_run(matrix, tmp_path / "run", probe=False)


def test_whole_models_pass(dense_pair: Pair, tmp_path: Path) -> None:
    matrix = _matrix(tmp_path, dense_pair.target, {"baseline": [], "draft4": ["-md", str(dense_pair.draft)]})
    check_model_files(load_matrix(matrix))  # no error
