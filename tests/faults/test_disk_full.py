"""A full (or read-only) disk is exit 5 with nothing half written, for every file of a run
directory: records, cells, manifest, scrapes, the matrix copy, engine logs."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from specbench.errors import DiskFullError, StoreError
from specbench.store import safeio
from specbench.store.rundir import RunStore
from specbench.store.schema import record_line
from tests.support.paths import FAKE_BIN
from tests.support.procs import specbench, tiny_disk

BIN = FAKE_BIN


def _record(i: int) -> dict[str, object]:
    return {"arm": "a", "prompt_id": f"p{i}", "repeat": 0, "warmup": False, "error": None, "pad": "x" * 300}


def _store(root: Path) -> RunStore:
    store = RunStore(root)
    store.create({"matrix": {"arms": {"a": []}}}, resume=False)
    store.append_lines([record_line(_record(0))])  # type: ignore[arg-type]
    store.append_cell({"arm": "a", "repeat": 0})
    store.sync()
    return store


WRITES: dict[str, Callable[[RunStore], object]] = {
    "records": lambda s: s.append_lines([record_line(_record(i)) for i in range(1, 5)]),  # type: ignore[arg-type]
    "cells": lambda s: s.append_cell({"arm": "a", "repeat": 1, "pad": "y" * 300}),
    "manifest": lambda s: s.set_arm_status("a", status="ok", note="z" * 300),
    "scrape": lambda s: s.save_scrape("a", 0, "before", "# HELP x\n" * 100),
    "matrix copy": lambda s: s.write_text("matrix.yaml", "arms: {a: []}\n" + "# c\n" * 100),
    "relayed log": lambda s: s.append_log("a", "line\n" * 100),
}


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file that holds something (an append may create its file before the disk fails)."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and p.stat().st_size)
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
@pytest.mark.parametrize("what", list(WRITES))
def test_a_write_that_fails_half_way_is_exit_5_and_leaves_every_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, code: int
) -> None:
    """FAKE writer: the disk takes half of what is written, then fails (what ENOSPC mid-write
    does), on any machine."""
    store = _store(tmp_path / "run")
    before = _snapshot(store.root)
    real_write = os.write

    def half_write(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(safeio.os, "write", half_write)
    with pytest.raises(StoreError) as err:
        WRITES[what](store)
    monkeypatch.undo()
    assert err.value.exit_code == 5 and "\n" not in str(err.value)
    assert isinstance(err.value, DiskFullError) == (code != errno.EROFS)
    assert os.strerror(code) in str(err.value) and ".tmp" not in str(err.value)
    assert _snapshot(store.root) == before  # no torn line, no half file, no temporary left
    store.close()


def _fake_vllm_matrix(folder: Path, prompts: int) -> Path:
    rows = [
        {"id": f"p{i}", "category": "chat", "prompt": f"Tell me about the sea, part {i}."}
        for i in range(prompts)
    ]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    matrix = {
        "engine": "vllm",
        "model": "Qwen/Qwen3-8B",  # what the FAKE vLLM serves (tests/fakes/fake_vllm.py)
        "engine_binary": str(BIN / "fake-vllm"),
        "common_args": [],
        "arms": {
            "baseline": [],
            "mtp": ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}'],
        },
        "workload": {
            "suite": "natural",
            "max_tokens": 64,
            "prompts": prompts,
            "prompt_file": "prompts.jsonl",
        },
        "repeats": 1,
        "warmup": 0,
        "startup_timeout": 60,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def _run(*args: str) -> tuple[int, str]:
    proc = specbench("run", *args, "--no-report")
    output = proc.communicate(timeout=300)[0]
    return proc.returncode, output


@pytest.mark.fake_engine
@pytest.mark.parametrize("size_kb", [24, 80])  # full while the run directory is made; while measuring
def test_a_run_on_a_full_disk_is_exit_5_without_a_torn_line_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size_kb: int
) -> None:
    """The issue's case, on a real small filesystem (tmpfs): it ended `internal error (OSError:
    [Errno 28] ...)`, exit 1, and at 120k left a 2,006-byte torn line in records.jsonl."""
    monkeypatch.setenv("SPECBENCH_FAKE_PYTHON", sys.executable)
    matrix = _fake_vllm_matrix(tmp_path, prompts=40)  # 80 records of about 1 KB: more than the disk
    with tiny_disk(tmp_path, size_kb) as disk:
        out = disk / "run"
        code, output = _run(str(matrix), "--out", str(out))
        assert code == 5, output
        last = output.strip().splitlines()[-1]
        assert last.startswith("error: ") and "No space left on device" in last and "--resume" in last
        records = out / "records.jsonl"
        data = records.read_bytes() if records.exists() else b""
        assert data == b"" or data.endswith(b"\n")
        assert all(json.loads(line) for line in data.splitlines())  # every line whole
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)  # space freed
        code, output = _run(str(matrix), "--out", str(out), "--resume")
        assert code == 0, output
        records = RunStore(out).records()
        done = [
            (r["arm"], r["prompt_id"], r["repeat"]) for r in records if not r["warmup"] and not r.get("error")
        ]
    # Every request measured once: none lost, none twice. A request whose stream failed when the
    # disk filled (the FAKE server's log is on it too: "Server disconnected") keeps its error
    # record and is sent again on --resume; that attempt measured nothing.
    assert len(done) == len(set(done)) == 80


def test_a_run_directory_on_a_read_only_disk_is_exit_5(tmp_path: Path) -> None:
    """A real read-only filesystem (tmpfs remounted ``ro``): --resume there used to end as an
    internal error (OSError from the lock file), exit 1."""
    with tiny_disk(tmp_path, 256) as disk:
        _store(disk / "run").close()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(StoreError, match="Read-only file system") as err:
            RunStore(disk / "run").create({"matrix": {"arms": {"a": []}}}, resume=True)
        assert err.value.exit_code == 5
