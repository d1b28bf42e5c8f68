"""The run directory as a journal: torn tails, a full disk, two writers, damaged files."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import DiskFullError, StoreError
from specbench.store import journal
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.procs import tiny_disk


def _record(i: int) -> dict[str, object]:
    return {"arm": "a", "prompt_id": f"p{i}", "repeat": 0, "warmup": False, "error": None, "pad": "x" * 200}


def _new_store(root: Path) -> RunStore:
    store = RunStore(root)
    store.create({"matrix": {"arms": {"a": []}}}, resume=False)
    return store


def test_a_torn_tail_is_cut_on_resume_and_the_next_record_is_readable(tmp_path: Path) -> None:
    store = _new_store(tmp_path / "run")
    for i in range(3):
        store.append_record(_record(i))
    store.close()
    with store.records_path.open("ab") as fh:  # what a hard kill in the middle of a write leaves
        fh.write(b'{"arm": "a", "prompt_id": "p3", "rep')
    reopened = RunStore(tmp_path / "run")
    reopened.create({"matrix": {"arms": {"a": []}}}, resume=True)
    assert reopened.repairs == [
        "records.jsonl: dropped a torn last line (36 bytes) left by an interrupted write"
    ]
    assert reopened.manifest()["repairs"] == reopened.repairs
    reopened.append_record(_record(3))
    reopened.close()
    assert [r["prompt_id"] for r in RunStore(tmp_path / "run").records()] == ["p0", "p1", "p2", "p3"]


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}')
    assert journal.repair(path) is None
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}\n'


def test_a_file_that_is_only_a_fragment_is_emptied(tmp_path: Path) -> None:
    path = tmp_path / "cells.jsonl"
    path.write_bytes(b'{"arm": "a", "rep')
    assert journal.repair(path) is not None and path.read_bytes() == b""


def test_readers_skip_and_count_damaged_lines(tmp_path: Path) -> None:
    store = _new_store(tmp_path / "run")
    store.append_record(_record(0))
    store.close()
    with store.records_path.open("ab") as fh:
        fh.write(b'garbage\n[1, 2]\n{"no": "keys"}\n\xff\xfe\n')
    reader = RunStore(tmp_path / "run")
    assert len(reader.records()) == 1 and reader.skipped == {"records.jsonl": 4}


def test_a_full_disk_stops_with_a_resumable_directory(tmp_path: Path) -> None:
    with tiny_disk(tmp_path, 256) as disk:
        store = _new_store(disk / "run")
        filler = disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as fh:
            fh.write(b"\0" * (200 << 10))  # most of the disk: the records hit the wall soon
        written = 0
        with pytest.raises(DiskFullError, match=r"No space left on device.*--resume"):
            for i in range(10_000):
                store.append_record(_record(i))
                written += 1
        store.close()
        assert written > 0
        assert store.records_path.read_bytes().endswith(b"\n")  # no fragment left behind
        filler.unlink()  # the user frees space
        resumed = RunStore(disk / "run")
        resumed.create({"matrix": {"arms": {"a": []}}}, resume=True)
        assert resumed.repairs == []
        resumed.append_record(_record(99_999))
        resumed.close()
        ids = [r["prompt_id"] for r in RunStore(disk / "run").records()]
        assert ids == [f"p{i}" for i in range(written)] + ["p99999"]


def test_a_short_write_is_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FAKE writer: the disk takes half a line (what ENOSPC mid-write does), on any machine."""
    store = _new_store(tmp_path / "run")
    store.append_record(_record(0))
    real_write = os.write

    def half_write(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal.os, "write", half_write)
    with pytest.raises(DiskFullError):
        store.append_record(_record(1))
    monkeypatch.undo()
    store.append_record(_record(2))
    store.close()
    assert [r["prompt_id"] for r in RunStore(tmp_path / "run").records()] == ["p0", "p2"]


def test_a_second_writer_is_refused_with_the_owner_named(tmp_path: Path) -> None:
    store = _new_store(tmp_path / "run")
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from specbench.store.rundir import RunStore;"
            "RunStore(Path(sys.argv[1])).create({'matrix': {'arms': {'a': []}}}, resume=True)",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert f"being written by another specbench (pid {os.getpid()}" in other.stderr
    store.close()
    again = RunStore(tmp_path / "run")
    again.create({"matrix": {"arms": {"a": []}}}, resume=True)  # released: the next writer gets it
    again.close()


@pytest.mark.parametrize(
    "name, content",
    [
        ("manifest.json", "{not json"),
        ("manifest.json", "[1, 2]"),
        ("manifest.json", '{"schema_version": "x"}'),
        ("manifest.json", "\udcff"),
        ("fitted_prompts.json", "{half"),
        ("fitted_prompts.json", "42"),
    ],
)
def test_damaged_json_files_are_one_line_store_errors(tmp_path: Path, name: str, content: str) -> None:
    store = _new_store(tmp_path / "run")
    store.close()
    (tmp_path / "run" / name).write_bytes(content.encode(errors="surrogateescape"))
    reader = RunStore(tmp_path / "run")
    with pytest.raises(StoreError, match=name) as err:
        reader.manifest() if name == "manifest.json" else reader.fitted_prompts()
    assert "\n" not in str(err.value)


def test_an_empty_manifest_object_reads(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({}))
    assert RunStore(tmp_path).manifest() == {}


@pytest.mark.engine
def test_a_run_resumed_after_a_torn_tail_ends_with_every_record(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """The issue's case: a hard kill tore the last line; --resume used to glue a record onto it."""
    from specbench import api
    from tests.support.procs import kill_all, tag, tagged_matrix

    name = tag()
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=2, forward_probe=False)
    out = tmp_path / "run"
    try:
        api.prepare_run(matrix, out).run()
        store = RunStore(out)
        lines = store.records_path.read_bytes().splitlines(keepends=True)
        last = lines[-1]
        store.records_path.write_bytes(b"".join(lines[:-1]) + last[: len(last) // 2])  # torn
        runner = api.prepare_run(matrix, out, resume=True)
        assert runner.store.repairs and "records.jsonl" in runner.store.repairs[0]
        runner.run()
    finally:
        kill_all(name)
    records = RunStore(out).records()
    assert RunStore(out).skipped == {}
    measured = {(r["arm"], r["prompt_id"], r["repeat"]) for r in records if not r["warmup"]}
    assert len(measured) == 6 and len(RunStore(out).completed()) == 6
