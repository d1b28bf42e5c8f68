"""store/recordwriter.py: records serialized on the loop, a turn at a time, written by a thread,
in the order they were handed over, whatever is left when the loop ends included."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from specbench.store import recordwriter
from specbench.store.recordwriter import RecordWriter
from specbench.store.rundir import RunStore


def _ids(store: RunStore) -> list[str]:
    return [json.loads(line)["prompt_id"] for line in store.records_path.read_text().splitlines()]


@pytest.fixture
def serialized(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt ids as records are serialized."""
    seen: list[str] = []
    real = recordwriter.record_line

    def counted(record: Any) -> str:
        seen.append(record["prompt_id"])
        return real(record)

    monkeypatch.setattr(recordwriter, "record_line", counted)
    return seen


def test_on_a_loop_a_record_is_serialized_on_a_later_turn_one_a_turn(
    tmp_path: Path, serialized: list[str]
) -> None:
    store = RunStore(tmp_path)
    writer = RecordWriter(store)

    async def burst() -> list[int]:
        for i in range(3):
            writer.append({"arm": "a", "prompt_id": f"p{i}", "repeat": 0})  # type: ignore[typeddict-item]
        counts = [len(serialized)]  # none in the call that hands them over
        for _ in range(4):
            await asyncio.sleep(0)
            counts.append(len(serialized))
        return counts

    # The drainer starts on the next turn and serializes from the turn after: one a turn.
    assert asyncio.run(burst()) == [0, 0, 1, 2, 3]
    writer.close()
    assert _ids(store) == ["p0", "p1", "p2"]


def test_what_the_loop_left_is_written_by_close_in_order(tmp_path: Path, serialized: list[str]) -> None:
    store = RunStore(tmp_path)
    writer = RecordWriter(store)

    async def run() -> None:
        for i in range(50):
            writer.append({"arm": "a", "prompt_id": f"p{i}", "repeat": 0})  # type: ignore[typeddict-item]
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # two of them serialized; the loop ends with 48 left

    asyncio.run(run())
    assert len(serialized) == 2
    writer.close()
    assert _ids(store) == [f"p{i}" for i in range(50)]


def test_a_writer_kept_over_two_loops_drains_on_the_second(tmp_path: Path, serialized: list[str]) -> None:
    store = RunStore(tmp_path)
    writer = RecordWriter(store)

    async def one(i: int, turns: int) -> None:
        writer.append({"arm": "a", "prompt_id": f"p{i}", "repeat": 0})  # type: ignore[typeddict-item]
        for _ in range(turns):
            await asyncio.sleep(0)

    asyncio.run(one(0, 0))  # the first loop ends before its drainer ran
    asyncio.run(one(1, 3))  # a drainer of the second loop's takes both
    assert serialized == ["p0", "p1"]
    writer.close()
    assert _ids(store) == ["p0", "p1"]


def test_outside_a_loop_a_record_is_serialized_when_handed_over(
    tmp_path: Path, serialized: list[str]
) -> None:
    writer = RecordWriter(RunStore(tmp_path))
    writer.append({"arm": "a", "prompt_id": "p0", "repeat": 0})  # type: ignore[typeddict-item]
    assert serialized == ["p0"]
    writer.close()


def test_a_record_that_cannot_be_serialized_on_the_loop_is_raised_and_the_others_kept(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    writer = RecordWriter(store)
    looped: dict[str, Any] = {"arm": "a", "prompt_id": "bad", "repeat": 0}
    looped["self"] = looped  # JSON cannot hold it

    async def run() -> None:
        writer.append({"arm": "a", "prompt_id": "p0", "repeat": 0})  # type: ignore[typeddict-item]
        writer.append(looped)  # type: ignore[arg-type]
        for _ in range(4):
            await asyncio.sleep(0)
        with pytest.raises(ValueError, match="Circular reference"):
            writer.append({"arm": "a", "prompt_id": "p1", "repeat": 0})  # type: ignore[typeddict-item]

    asyncio.run(run())
    with pytest.raises(ValueError, match="Circular reference"):
        writer.close()
    assert _ids(store) == ["p0"]  # the record before it is written, not dropped with it


def test_a_ctrl_c_while_serializing_keeps_the_record_and_close_still_joins_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = RecordWriter(RunStore(tmp_path))

    async def hand_over() -> None:  # the loop ends before its drainer serialized the record
        writer.append({"arm": "a", "prompt_id": "p0", "repeat": 0})  # type: ignore[typeddict-item]

    asyncio.run(hand_over())

    def interrupted(record: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(recordwriter, "record_line", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.close()
    assert not writer._thread.is_alive()  # what it had been given is written before close ends
    assert [r["prompt_id"] for r in writer._pending] == ["p0"]  # taken off only once serialized
