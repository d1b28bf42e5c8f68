"""Appending records: fsync per record (before) vs the journal's batched fsync (now), side by side.

Prints the time per record of each and their ratio; no threshold, the figure is for the reader.
Run: .venv/bin/python bench/journal_fsync.py [RECORDS] [DIR]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from specbench.store.journal import Journal

RECORD = {
    "arm": "draft4",
    "prompt_id": "p0",
    "repeat": 0,
    "chunks": [[i * 1000, "tok", None] for i in range(64)],
}


def per_record_fsync(path: Path, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        with path.open("a") as fh:  # what RunStore.append did before the journal
            fh.write(json.dumps(RECORD) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    return time.perf_counter() - start


def batched(path: Path, n: int) -> float:
    journal = Journal(path)
    start = time.perf_counter()
    for _ in range(n):
        journal.append(RECORD)
    journal.close()
    return time.perf_counter() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    with tempfile.TemporaryDirectory(dir=sys.argv[2] if len(sys.argv) > 2 else None) as tmp:
        before = per_record_fsync(Path(tmp) / "a.jsonl", n)
        now = batched(Path(tmp) / "b.jsonl", n)
    print(f"records: {n}")
    print(f"fsync per record: {before / n * 1e6:9.1f} µs/record")
    print(f"batched journal:  {now / n * 1e6:9.1f} µs/record")
    print(f"ratio (before / now): {before / now:.1f}x")


if __name__ == "__main__":
    main()
