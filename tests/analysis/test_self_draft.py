"""SELF_DRAFT by content (#27): a byte-identical copy of the target used as the draft is the target
drafting for itself, whatever its path — by the SHA-256 env.json records, or the files' own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specbench import analysis
from specbench.analysis.findings import acceptance
from specbench.engines.llamacpp import LlamaCppEngine
from tests.support.synth import Arm, Plan, make_run, spec

LLAMA = LlamaCppEngine()
WEIGHTS = b"GGUF" + bytes(range(256)) * 8


def _args(draft: Path | str) -> list[str]:
    return ["-md", str(draft), "--spec-type", "draft-simple"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))  # the SHA-256 cache


def test_a_copy_or_a_link_of_the_target_is_a_self_draft(tmp_path: Path) -> None:
    target, copy, link = tmp_path / "target.gguf", tmp_path / "copy" / "draft.gguf", tmp_path / "link.gguf"
    target.write_bytes(WEIGHTS)
    copy.parent.mkdir()
    copy.write_bytes(WEIGHTS)
    os.symlink(target, link)
    found = acceptance.self_draft("copy", _args(copy), str(target), LLAMA)
    assert found is not None and found.code == "SELF_DRAFT" and "byte-identical copy" in found.evidence
    linked = acceptance.self_draft("link", _args(link), str(target), LLAMA)
    assert linked is not None and "the same file" in linked.evidence
    other = tmp_path / "other.gguf"  # the same size, other bytes: a real draft
    other.write_bytes(WEIGHTS[::-1])
    assert acceptance.self_draft("other", _args(other), str(target), LLAMA) is None


def test_env_json_decides_where_the_files_are_gone(tmp_path: Path) -> None:
    """A run analysed on another machine: only env.json's SHA-256 says what the draft was."""
    sha = "ab" * 32
    env = {
        "model": {"path": "/models/target.gguf", "sha256": sha},
        "arm_files": {"copy": [{"flag": "-md", "path": "/models/copy.gguf", "sha256": sha}]},
    }
    found = acceptance.self_draft("copy", _args("/models/copy.gguf"), "/models/target.gguf", LLAMA, env=env)
    assert found is not None and "SHA-256 recorded in env.json" in found.evidence
    env["arm_files"] = {"copy": [{"flag": "-md", "path": "/models/copy.gguf", "sha256": "cd" * 32}]}
    assert (
        acceptance.self_draft("copy", _args("/models/copy.gguf"), "/models/target.gguf", LLAMA, env=env)
        is None
    )
    flagged = {"copy": [{"path": "/models/copy.gguf", "sha256": "cd" * 32, "same_as_target": True}]}
    named = acceptance.self_draft(
        "copy", _args("/models/copy.gguf"), "/m/t.gguf", LLAMA, env={"arm_files": flagged}
    )
    assert named is not None and named.code == "SELF_DRAFT"


def test_a_copied_draft_is_a_self_draft_not_an_acceptance_artefact(tmp_path: Path) -> None:
    """Regression: the copy was judged by path, so its 100 % acceptance read as a counter artefact."""
    run_dir = make_run(
        tmp_path / "run", Plan(arms={"baseline": Arm(decode_tok_s=30), "copy": spec(45, acceptance=1.0)})
    )
    models = tmp_path / "models"
    models.mkdir()
    (models / "target.gguf").write_bytes(WEIGHTS)
    (models / "draft.gguf").write_bytes(WEIGHTS)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["matrix"]["model"] = str(models / "target.gguf")
    manifest["matrix"]["arms"]["copy"][1] = str(models / "draft.gguf")
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    found = [f for f in analysis.judge(analysis.load_run(run_dir)) if "copy" in f.arms]
    codes = {f.code for f in found}
    assert "SELF_DRAFT" in codes and "ACCEPTANCE_ARTEFACT" not in codes
    (selfdraft,) = [f for f in found if f.code == "SELF_DRAFT"]
    assert "timings 1.000" in selfdraft.evidence  # the acceptance it explains, quoted
