"""The record schema: one version, one writer, chunks read by name in every version, one metric
table; and the runner/executor seam (executors never import the runner)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import specbench
from specbench.analysis import metrics, stats
from specbench.analysis.tables import frames
from specbench.importer import import_file
from specbench.report.merge import merge_runs
from specbench.store import schema
from specbench.store.recordwriter import RecordWriter
from specbench.store.rundir import RunStore
from specbench.store.schema import SCHEMA_VERSION, Chunk, RequestRecord, chunks

SRC = Path(specbench.__file__).parent


def test_the_package_version_is_the_schemas() -> None:
    assert specbench.SCHEMA_VERSION is schema.SCHEMA_VERSION == SCHEMA_VERSION


def test_a_chunk_is_written_as_the_json_list_it_always_was() -> None:
    chunk = Chunk(12, "hi", None, None, "stop", 3)
    assert json.loads(json.dumps({"chunks": [chunk]})) == {"chunks": [[12, "hi", None, None, "stop", 3]]}


def test_chunks_are_read_by_name_in_both_schema_versions() -> None:
    rec: dict[str, Any] = {
        "chunks": [[0, None, None, None, None], [5, "a", None, None, None, 2], [9, None, "r", None, "stop"]]
    }
    got = chunks(rec)
    assert [c.t_ns for c in got] == [0, 5, 9]
    assert [c.tokens for c in got] == [None, 2, None]  # schema-1 rows have no running count
    assert [c.carries_token for c in got] == [False, True, True]
    assert got[2].finish_reason == "stop" and got[2].reasoning == "r"
    assert chunks({}) == [] and chunks({"chunks": None}) == []


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_record_writer_stamps_the_same_line(tmp_path: Path) -> None:
    chunk = Chunk(1, "x", None, None, None)
    rec: RequestRecord = {"arm": "a", "prompt_id": "p", "repeat": 0, "chunks": [chunk]}
    one, batch, threaded = (RunStore(tmp_path / name) for name in ("one", "batch", "threaded"))
    for store in (one, batch, threaded):
        store.root.mkdir()
    one.append_record(rec)
    one.close()
    batch.append_records([rec])
    writer = RecordWriter(threaded)
    writer.append(rec)
    writer.close()
    lines = [_lines(s.records_path) for s in (one, batch, threaded)]
    assert lines[0] == lines[1] == lines[2]
    assert lines[0] == [{"schema_version": SCHEMA_VERSION, **json.loads(json.dumps(rec))}]


def test_a_merged_run_keeps_each_lines_own_version(tmp_path: Path) -> None:
    """Merging copies lines through the one writer; an old line's version is not overwritten."""
    runs = []
    for i, version in enumerate((1, SCHEMA_VERSION)):
        store = RunStore(tmp_path / f"run{i}")
        store.create({"matrix": {"arms": {"a": []}}}, resume=False)
        line = {"schema_version": version, "arm": "a", "prompt_id": "p", "repeat": 0}
        with store.records_path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")
        runs.append(store.root)
    out = merge_runs(runs, tmp_path / "merged")
    assert [r["schema_version"] for r in _lines(out / "records.jsonl")] == [1, SCHEMA_VERSION]


def test_an_imported_run_is_written_with_the_schema_version(tmp_path: Path) -> None:
    src = tmp_path / "results.csv"
    src.write_text("arm,prompt,decode_tok_s,text\nbase,p0,10,hello\nspec,p0,12,hello\n")
    result = import_file(src, tmp_path / "run", baseline="base")
    lines = _lines(result.out / "records.jsonl")
    assert {r["schema_version"] for r in lines} == {SCHEMA_VERSION}
    t_ns, text, *rest = lines[0]["chunks"][0]
    assert math.isnan(t_ns) and text == "hello" and rest == [None, None, None, None]


def test_the_metric_table_gives_every_metric_a_unit_and_the_directions_stats_uses() -> None:
    assert all(m.unit for m in metrics.METRICS.values())
    for name, m in metrics.METRICS.items():
        if name.endswith("_ms"):
            assert m.better == "lower" and not stats.metric_higher_is_better(name)
        if name.endswith("_tok_s"):
            assert m.better == "higher" and stats.metric_higher_is_better(name)
    # Lists of metrics elsewhere name metrics of the table.
    assert set(stats.DEFAULT_METRICS) <= set(metrics.METRICS)
    assert set(frames.METRICS) <= set(metrics.METRICS)
    assert list(metrics.frame([]).columns) == [*metrics.KEYS, *metrics.METRICS, "stopped_early"]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_executors_never_import_the_runner() -> None:
    """The seam is specbench.executors.base: executors get the cells and a CellJob, not the Runner."""
    for path in sorted((SRC / "executors").glob("*.py")):  # base.py is the seam (was cellwork.py)
        assert not {m for m in _imports(path) if m.startswith("specbench.run")}, path.name
