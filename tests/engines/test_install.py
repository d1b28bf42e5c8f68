"""Installer behaviour that needs no build: finding binaries, cache keys, clear failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specbench.engines import install
from specbench.engines.install import BuildOptions, find_llama_server, install_llamacpp
from specbench.errors import InstallError


def test_cache_key_separates_build_options() -> None:
    assert BuildOptions().key == "0.3.36-cpu-noamx"
    assert BuildOptions(cuda=True).key == "0.3.36-cuda-noamx"
    assert BuildOptions(native=False).key == "0.3.36-cpu-portable"
    assert "-DGGML_CUDA=ON" in BuildOptions(cuda=True).cmake_args()
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in BuildOptions().cmake_args()  # no download at configure


def test_a_users_own_binary_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", str(exe))
    assert find_llama_server() == exe
    assert find_llama_server(str(exe)) == exe


def test_a_bad_explicit_binary_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(InstallError, match=r"\$SPECBENCH_LLAMA_SERVER: .*missing is not an executable"):
        find_llama_server()


def test_second_install_returns_the_cached_binary_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    binary = install.cached_binary(BuildOptions())
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    monkeypatch.setattr(install, "fetch_source", lambda _d: pytest.fail("must not fetch"))
    assert install_llamacpp(BuildOptions()) == binary


def test_missing_cmake_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "cmake" else real_which(name))
    with pytest.raises(InstallError, match=r"^cmake not found: install it"):
        install_llamacpp(BuildOptions())


def test_full_disk_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: _Usage())
    with pytest.raises(InstallError, match="less than 3 GB free"):
        install_llamacpp(BuildOptions())


class _Usage:
    total = used = free = 1024


def test_build_failures_are_summarised() -> None:
    assert "disk is full" in install.failure_line("x\nNo space left on device\n")
    assert (
        install.failure_line("ok\nfoo.cpp:1: error: bad thing\nninja: stopped")
        == "foo.cpp:1: error: bad thing"
    )


def test_a_native_build_compiles_out_the_amx_kernels_that_segfault() -> None:
    """-march=native enables AMX on Sapphire Rapids, where ggml's AMX Q4_K matmul segfaults
    (llama.cpp #20824; Gemma 3 270M here): native builds pass -mno-amx-*, which win over -march."""
    args = BuildOptions().cmake_args()
    for lang in ("C", "CXX"):
        flags = next(a for a in args if a.startswith(f"-DCMAKE_{lang}_FLAGS="))
        assert {"-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"} <= set(flags.split("=", 1)[1].split())
    assert not any("amx" in a for a in BuildOptions(native=False).cmake_args())
