"""Issue 31: a loaded run keeps its records' chunks packed in arrays, with every number unchanged.

The run is the report tests' synthetic run with stalled requests (schema-1 rows, no token
counts), plus schema-2 rows with running counts, reasoning and a tool call, so every path the
checks read chunks through is compared: the request frame, the stall check, the answers, the
tool calls and the rows themselves, against the records as read from the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.analysis import launchorder
from specbench.analysis.evidence import stalls
from specbench.analysis.findings import outputs
from specbench.analysis.packed import PackedChunks
from specbench.analysis.rundata import load_run
from specbench.engines import read_record
from specbench.store.rundir import RunStore
from specbench.store.schema import chunks
from tests.support.stalls import run_with_stalls


def _schema2(rec: dict[str, Any], i: int) -> None:
    """Running token counts (two per chunk), a reasoning row first and, every 5th, a tool call."""
    rows = rec["chunks"]
    if not rows:
        return
    for k, row in enumerate(rows):
        row[5:] = [2 * (k + 1) if row[1] else None]  # the running count, set or replaced
    rows.insert(0, [rows[0][0] - 1000, None, "thinking", None, None, 0])
    if i % 5 == 0:
        call = [{"index": 0, "function": {"name": "f", "arguments": '{"a": 1}'}}]
        rows.insert(1, [rows[0][0] + 10, "", None, call, None, 0])


def _run(root: Path) -> Path:
    run = run_with_stalls(root)
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    for i, rec in enumerate(lines):
        if rec["arm"] == "baseline":
            _schema2(rec, i)
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run


def test_a_loaded_run_holds_packed_chunks_that_read_as_the_json_did(tmp_path: Path) -> None:
    root = _run(tmp_path / "r")
    store = RunStore(root)
    lines = store.records()
    raw = [read_record(line) for line in lines]
    run = load_run(root)
    assert len(run.records) == len(raw)
    assert all(isinstance(r.chunks, PackedChunks) for r in run.records if r.chunks)
    for loaded, read in zip(run.records, raw, strict=True):
        assert loaded.chunk_rows() == read.chunk_rows() == chunks(read.line)
        assert outputs.tool_calls(loaded) == outputs.tool_calls(read)
    assert any(outputs.tool_calls(r) for r in raw)
    want = launchorder.ordered_frame(lines, store.manifest(), store.cells())
    # The analysis adds each request's operating point (and fills a phase the record lacks).
    pd.testing.assert_frame_equal(
        run.df.drop(columns=["point", "phase"]), want.drop(columns="phase"), check_exact=True
    )
    assert stalls.stalled(run.records) == stalls.stalled(raw) != {}
    for loaded, read in zip(run.records, raw, strict=True):
        a, b = stalls.stream(loaded), stalls.stream(read)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a.gap_ms.tolist() == b.gap_ms.tolist() and a.gap_tokens.tolist() == b.gap_tokens.tolist()
            assert (a.usual_ms, a.window_ms) == (b.usual_ms, b.window_ms)
    pd.testing.assert_frame_equal(outputs.output_texts(run.records), outputs.output_texts(raw))


def test_odd_rows_stay_as_they_were_read(tmp_path: Path) -> None:
    """A row that is not plain numbers and text (hand-edited) is not packed, and reads as before."""
    from specbench.analysis.packed import pack

    rec = {"chunks": [[1, "a", None, None, None, 1], ["late", "b", None, None, "stop", 2]]}
    assert pack(dict(rec))["chunks"] == rec["chunks"]
    bools = {"chunks": [[True, "a", None, None, None]]}
    assert pack(dict(bools))["chunks"] == bools["chunks"]
