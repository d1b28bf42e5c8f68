"""A record is a type (#42 item 3): a line read once as a frozen Record, values as read, the
server's counts engine-neutral, the line on disk unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specbench.engines import read_record
from specbench.store.record import NO_COUNTS, Record, ServerCounts, as_records
from specbench.store.rundir import RunStore
from specbench.store.schema import Chunk

LINE = {
    "schema_version": 2, "arm": "spec", "prompt_id": "p1", "repeat": 1, "workload": "natural",
    "warmup": False, "seq": 7, "request": {"max_tokens": 8, "temperature": 0.0}, "t_end_ns": 9_000_000,
    "chunks": [[1_000_000, "a", None, None, None, 1], [2_000_000, "bc", None, None, "stop", 3]],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3}, "error": None,
    "timings": {"draft_n": 4, "draft_n_accepted": 2, "predicted_per_second": 500.0}, "node": "n1",
}  # fmt: skip


def test_a_line_reads_once_into_attributes_and_keeps_every_field() -> None:
    rec = read_record(LINE)
    assert rec.key == ("spec", "p1", 1) and rec.measured and rec.max_tokens == 8 and rec.temperature == 0.0
    assert rec.completion_tokens == 3 and rec.prompt_tokens == 5
    assert rec.counts == ServerCounts(drafted=4.0, accepted=2.0, decode_tok_s=500.0)
    assert rec.line is LINE and rec.line["node"] == "n1"  # a field no reader names stays in the line
    assert rec.chunk_rows() == [
        Chunk(1_000_000, "a", None, None, None, 1),
        Chunk(2_000_000, "bc", None, None, "stop", 3),
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.arm = "other"  # type: ignore[misc]


def test_an_old_line_reads_as_it_was_written() -> None:
    """Unstamped, five-field chunks, no engine fields: nothing is coerced or invented."""
    old = {"arm": "a", "prompt_id": 3, "repeat": 0, "chunks": [[5, "x", None, None, "stop"]]}
    rec = Record.read(old)
    assert rec.schema_version is None and rec.prompt_id == 3 and rec.warmup is None
    assert rec.counts is NO_COUNTS and rec.completion_tokens is ... and rec.max_tokens is None
    assert rec.chunk_rows() == [Chunk(5, "x", None, None, "stop", None)]


def test_a_measuring_copy_holds_a_memo_and_equals_its_record() -> None:
    rec = read_record(LINE)
    copy = rec.measuring({"k": 1})
    assert copy == rec and copy.memo == {"k": 1} and rec.memo is None and copy.line is rec.line
    assert as_records([rec, LINE], read_record) == [rec, rec]


def test_typed_records_read_the_lines_the_raw_reader_reads(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    lines = [json.dumps(LINE), "{torn", json.dumps({**LINE, "seq": 8, "warmup": True})]
    store.records_path.write_text("\n".join(lines) + "\n")
    typed = list(store.typed_records(read_record))
    assert [r.seq for r in typed] == [r["seq"] for r in store.records()] == [7, 8]
    assert store.skipped == {"records.jsonl": 1} and typed[0].counts.drafted == 4.0
