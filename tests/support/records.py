"""Run-directory lines written as specbench writes them: records through
:func:`specbench.store.schema.record_line` (the record writer's serializer), cells through
:func:`specbench.store.schema.stamped`, so each line carries the current schema version unless it
already says which version it is."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from specbench.store.schema import CellInfo, RequestRecord, record_line, stamped


def write_records(path: Path, records: Iterable[RequestRecord | Mapping[str, Any]]) -> None:
    """``records.jsonl`` holding ``records``, one line each, in order."""
    path.write_text("".join(record_line(RequestRecord(**r)) for r in records))


def write_cells(path: Path, cells: Iterable[CellInfo | Mapping[str, Any]]) -> None:
    """``cells.jsonl`` holding ``cells``, one line each, in order."""
    path.write_text("".join(json.dumps(stamped(CellInfo(**c))) + "\n" for c in cells))


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a ``.jsonl`` file, parsed."""
    return [json.loads(line) for line in path.read_text().splitlines()]
