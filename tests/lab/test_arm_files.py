"""Every file an arm's flags name is hashed into env.json, not only the target."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from specbench.lab.real import GEMMA3_270M, server_args, template_path
from specbench.matrix.load import load_matrix
from specbench.run.prepare import arm_files


def test_draft_and_template_files_are_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "target.gguf").write_bytes(b"target")
    (tmp_path / "draft.gguf").write_bytes(b"draft")
    matrix = {
        "engine": "llamacpp",
        "model": "target.gguf",
        "common_args": server_args(GEMMA3_270M),
        "arms": {"baseline": [], "draft": ["-md", "draft.gguf", "--spec-type", "draft-simple"]},
        "workload": {"suite": "single"},
    }
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(matrix))
    files = arm_files(load_matrix(tmp_path / "m.yaml"))
    template = template_path(GEMMA3_270M)
    assert template is not None
    expected_template = {"flag": "--chat-template-file", "path": str(template.resolve())}
    assert [{k: f[k] for k in ("flag", "path")} for f in files["baseline"]] == [expected_template]
    draft = files["draft"][1]
    assert (draft["flag"], draft["path"]) == ("-md", str((tmp_path / "draft.gguf").resolve()))
    assert draft["sha256"] == hashlib.sha256(b"draft").hexdigest() and draft["bytes"] == 5
    assert files["draft"][0]["sha256"] == hashlib.sha256(template.read_bytes()).hexdigest()
    assert [f["same_as_target"] for f in files["draft"]] == [False, False]


def test_self_draft_is_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "target.gguf").write_bytes(b"weights")
    (tmp_path / "copy.gguf").write_bytes(b"weights")  # another path, same bytes: still self-draft
    arms = {"baseline": [], "self": ["-md", "copy.gguf"], "own": ["-md", "target.gguf"]}
    matrix = {"engine": "llamacpp", "model": "target.gguf", "arms": arms, "workload": {"suite": "single"}}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(matrix))
    files = arm_files(load_matrix(tmp_path / "m.yaml"))
    assert [f["same_as_target"] for arm in ("self", "own") for f in files[arm]] == [True, True]
