"""Issue 44, "what ran is what is shown": each launch re-checks the model files it serves against
the run's env.json, hashing only a file whose size or mtime moved; a change that a launch of the
run already measured is refused (exit 5), one that nothing measured is adopted and recorded."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.errors import ModelChangedError
from specbench.matrix.config import Matrix
from specbench.run import servedfiles
from specbench.run.servedfiles import ServedFiles, arm_files, file_record
from specbench.store import rundir
from specbench.store.rundir import RunStore
from specbench.store.schema import CellInfo

OLD, NEW = b"o" * 1000, b"n" * 600


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))  # the SHA-256 cache


def _run(tmp_path: Path) -> tuple[Matrix, RunStore]:
    """A run directory whose env.json records target.gguf (OLD) and the draft arm's draft.gguf."""
    (tmp_path / "target.gguf").write_bytes(OLD)
    (tmp_path / "draft.gguf").write_bytes(b"d" * 300)
    matrix = Matrix(
        model=str(tmp_path / "target.gguf"),
        arms={"baseline": (), "draft": ("-md", str(tmp_path / "draft.gguf"), "--spec-type", "draft-simple")},
        workload={"suite": "natural", "max_tokens": 8, "prompts": 1},
    )
    store = RunStore(tmp_path / "run")
    store.create({"matrix": matrix.model_dump(mode="json")}, resume=False)
    store.write_env({"model": file_record(matrix.model), "arm_files": arm_files(matrix)})
    return matrix, store


def _served(matrix: Matrix, store: RunStore) -> ServedFiles:
    return ServedFiles(matrix, LlamaCppEngine(Path("llama-server")), store)


def _replace(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(1, 1))  # a new mtime, whatever the clock's resolution


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = rundir.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(servedfiles, "file_sha256", counting)
    return hashed


def test_a_launch_of_untouched_files_reads_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, store = _run(tmp_path)
    hashed = _count_hashes(monkeypatch)
    files, changes = _served(matrix, store).changes(matrix.arm_args("draft"))
    assert hashed == [] and changes == []
    assert [(f["role"], f["path"], f["sha256"]) for f in files] == [
        ("model", matrix.model, _sha(OLD)),
        ("draft model", str(tmp_path / "draft.gguf"), _sha(b"d" * 300)),
    ]


def test_a_touched_file_is_hashed_once_and_is_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, store = _run(tmp_path)
    served = _served(matrix, store)
    _replace(Path(matrix.model), OLD)  # the same bytes, a new mtime (a copy put back)
    hashed = _count_hashes(monkeypatch)
    assert served.changes(matrix.arm_args("baseline"))[1] == []
    assert served.changes(matrix.arm_args("baseline"))[1] == []
    assert hashed == [Path(matrix.model)]


def test_a_file_no_launch_served_is_adopted_into_the_runs_description(tmp_path: Path) -> None:
    """The reported case: every launch of the old (truncated) file failed, so no cell served it."""
    matrix, store = _run(tmp_path)
    _replace(Path(matrix.model), NEW)
    served = _served(matrix, store)
    files, changes = served.changes(matrix.arm_args("baseline"))
    assert files[0]["sha256"] == _sha(NEW) and len(changes) == 1
    assert changes[0].note() == (
        f"model {matrix.model} changed since this run recorded it (sha256 {_sha(OLD)[:12]}…, 1,000 bytes; "
        f"now sha256 {_sha(NEW)[:12]}…, 600 bytes); no launch served the old file, so env.json and "
        "architectures.json now describe the new one"
    )
    served.adopt(changes)
    env = store.env()
    assert (env["model"]["sha256"], env["model"]["bytes"]) == (_sha(NEW), 600)
    [entry] = store.manifest()["model_changes"]
    assert entry["path"] == matrix.model and entry["old"] == {"sha256": _sha(OLD), "bytes": 1000}
    assert (entry["new"]["sha256"], entry["new"]["bytes"]) == (_sha(NEW), 600)
    assert served.changes(matrix.arm_args("baseline"))[1] == []  # adopted: the next launch is silent


def _cell(store: RunStore, arm: str, files: list[dict[str, Any]] | None) -> None:
    cell: CellInfo = {"arm": arm, "repeat": 0}
    if files is not None:
        cell["model_files"] = files
    store.append_cell(cell)
    store.sync()


def test_a_file_a_launch_measured_is_refused_naming_both_contents(tmp_path: Path) -> None:
    matrix, store = _run(tmp_path)
    _cell(store, "baseline", [{"role": "model", "path": matrix.model, "sha256": _sha(OLD), "bytes": 1000}])
    _replace(Path(matrix.model), NEW)
    with pytest.raises(ModelChangedError) as err:
        _served(matrix, store).changes(matrix.arm_args("draft"))
    assert err.value.exit_code == 5
    assert str(err.value) == (
        f"model {matrix.model} changed since this run recorded it (sha256 {_sha(OLD)[:12]}…, 1,000 bytes; "
        f"now sha256 {_sha(NEW)[:12]}…, 600 bytes), and 1 launch of this run measured the old file: "
        "going on would compare two models in one run; put the measured file back and --resume, or "
        "start a new --out"
    )
    assert json.loads((store.root / "env.json").read_text())["model"]["sha256"] == _sha(OLD)  # untouched


def test_a_cell_from_before_cells_named_their_files_served_the_recorded_ones(tmp_path: Path) -> None:
    """Its arm's files count as the recorded content: a baseline cell served the target, not the
    draft, so a changed draft with only baseline cells measured is adopted, a changed target not."""
    matrix, store = _run(tmp_path)
    _cell(store, "baseline", None)
    _replace(tmp_path / "draft.gguf", b"e" * 300)
    served = _served(matrix, store)
    [change] = served.changes(matrix.arm_args("draft"))[1]
    assert change.role == "draft model" and change.measured == 0
    _replace(Path(matrix.model), NEW)
    with pytest.raises(ModelChangedError, match=r"and 1 launch of this run measured the old file"):
        served.changes(matrix.arm_args("baseline"))


def test_a_draft_spelled_with_an_equals_sign_is_recorded_and_checked(tmp_path: Path) -> None:
    """env.json recorded ``-md PATH`` only: ``--spec-draft-model=PATH`` was served unchecked."""
    matrix, store = _run(tmp_path)
    joined = ("--spec-draft-model=" + str(tmp_path / "draft.gguf"), "--spec-type", "draft-simple")
    matrix = matrix.model_copy(update={"arms": {**matrix.arms, "joined": joined}})
    store.write_env({"model": file_record(matrix.model), "arm_files": arm_files(matrix)})
    assert [f["flag"] for f in store.env()["arm_files"]["joined"]] == ["--spec-draft-model"]
    _cell(store, "joined", None)  # served the recorded draft
    _replace(tmp_path / "draft.gguf", b"e" * 300)
    with pytest.raises(ModelChangedError, match=r"^draft model .*draft\.gguf changed since this run"):
        _served(matrix, store).changes(matrix.arm_args("joined"))


def test_a_file_missing_when_the_run_began_is_held_to_what_its_cells_served(tmp_path: Path) -> None:
    matrix, store = _run(tmp_path)
    store.write_env({"model": file_record(matrix.model)})  # the draft was not there then
    draft = str(tmp_path / "draft.gguf")
    _cell(store, "draft", [{"role": "draft model", "path": draft, "sha256": _sha(b"d" * 300), "bytes": 300}])
    served = _served(matrix, store)
    assert served.changes(matrix.arm_args("draft"))[1] == []  # the content the cell served
    _replace(tmp_path / "draft.gguf", b"e" * 300)
    with pytest.raises(ModelChangedError, match=r"and 1 launch of this run measured the old file"):
        served.changes(matrix.arm_args("draft"))
