"""Issue 44: a model file cut short (an interrupted download or copy) is a bad input, refused
with one line naming it before anything is launched or written, by ``run --dry-run`` and ``run``
alike; before, the dry run planned "CPU decode of a 10 MB model" from the first 10 MB of a file
and the run failed at llama.cpp's load, quoting it but naming no file.

And what ran is what is shown: a model file that changes under a run directory is either refused
(a launch measured the old file: exit 5) or becomes what the run's env.json and architectures.json
describe, said on the console and kept in the manifest (nothing measured the old file)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import gguf
import pytest
import yaml

from specbench import api
from specbench.errors import ConfigError
from specbench.matrix.load import load_matrix
from specbench.run import prepare
from specbench.run.modelfiles import check_model_files
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import draft4
from tests.support.procs import kill_all, specbench, tag, tagged_matrix


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


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _target_matrix(tmp_path: Path, pair: Pair, llama_server: Path, name: str, target: Path) -> Path:
    """One repeat of a baseline and a draft arm on ``target`` (a copy the test may change)."""
    matrix = tagged_matrix(tmp_path, pair, llama_server, name, repeats=1, forward_probe=False)
    raw: dict[str, Any] = yaml.safe_load(matrix.read_text())
    raw["model"] = str(target)
    raw["arms"]["draft4"] = ["--alias", name, *draft4(pair)]
    raw["workload"]["prompts"] = 2
    matrix.write_text(yaml.safe_dump(raw))
    return matrix


@pytest.mark.engine
def test_a_target_fixed_after_a_failed_run_is_what_the_resumed_run_describes(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported: a run on a truncated GGUF failed; the good file was put at the same path and
    `--resume --retry-failed` ended with exit 0 and no word, while env.json, BENCHMARK_ENV.md and
    architectures.json kept the truncated file's SHA-256 and size (the theory read the target as
    "0.59 bits/weight"). The first run is made as a specbench from before the cut-short check
    (54209e6) made it, the check switched off: the truncated file recorded, every launch failed."""
    name = tag()
    good, half = dense_pair.target.stat().st_size, dense_pair.target.stat().st_size // 2
    target = _cut(dense_pair.target, tmp_path / "target.gguf", half)
    cut_sha, good_sha = _sha(target), _sha(dense_pair.target)
    matrix = _target_matrix(tmp_path, dense_pair, llama_server, name, target)
    out = tmp_path / "run"
    monkeypatch.setattr(prepare, "check_model_files", lambda matrix: None)
    try:
        api.prepare_run(matrix, out).run()
        assert RunStore(out).env()["model"]["sha256"] == cut_sha and not RunStore(out).cells()
        shutil.copyfile(dense_pair.target, target)  # the fix
        proc = specbench("run", str(matrix), "--out", str(out), "--resume", "--retry-failed", "--no-report")
        output = proc.communicate(timeout=300)[0]
    finally:
        orphans = kill_all(name)
    assert proc.returncode == 0 and orphans == 0, output
    assert (
        f"warning: model {target} changed since this run recorded it (sha256 {cut_sha[:12]}…, "
        f"{half:,} bytes; now sha256 {good_sha[:12]}…, {good:,} bytes); no launch served the old file, "
        "so env.json and architectures.json now describe the new one"
    ) in output.splitlines()
    store = RunStore(out)
    env = store.env()
    assert (env["model"]["sha256"], env["model"]["bytes"]) == (good_sha, good)
    assert json.loads((out / "architectures.json").read_text())[str(target)]["bytes"] == good
    [change] = store.manifest()["model_changes"]
    assert change["old"] == {"sha256": cut_sha, "bytes": half} and change["new"]["sha256"] == good_sha
    served = {(f["role"], f["sha256"]) for cell in store.cells() for f in cell["model_files"]}
    assert served == {("model", good_sha), ("draft model", _sha(dense_pair.draft))}
    assert len(store.completed()) == 4


@pytest.mark.engine
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_target_replaced_after_launches_measured_it_is_refused_with_exit_5(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, dry_run: bool
) -> None:
    """Going on would compare two models in one run: one line naming the file and both contents,
    exit 5 (a run directory that does not match its inputs), by `--dry-run --resume` alike."""
    name = tag()
    target = tmp_path / "target.gguf"
    shutil.copyfile(dense_pair.target, target)
    matrix = _target_matrix(tmp_path, dense_pair, llama_server, name, target)
    out = tmp_path / "run"
    try:
        api.prepare_run(matrix, out).run()
        measured = RunStore(out).completed()
        assert len(measured) == 4
        shutil.copyfile(dense_pair.draft, target)  # another whole GGUF at the same path
        proc = specbench(
            "run", str(matrix), "--out", str(out), "--resume", *(["--dry-run"] if dry_run else [])
        )
        output = proc.communicate(timeout=300)[0]
    finally:
        orphans = kill_all(name)
    old, new = dense_pair.target, dense_pair.draft
    assert proc.returncode == 5 and orphans == 0, output
    assert output.strip().splitlines() == [
        f"error: model {target} changed since this run recorded it (sha256 {_sha(old)[:12]}…, "
        f"{old.stat().st_size:,} bytes; now sha256 {_sha(new)[:12]}…, {new.stat().st_size:,} bytes), and 2 "
        "launches of this run measured the old file: going on would compare two models in one run; put "
        "the measured file back and --resume, or start a new --out"
    ]
    store = RunStore(out)
    assert store.completed() == measured and store.env()["model"]["sha256"] == _sha(old)
