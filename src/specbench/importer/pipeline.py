"""The import itself: each stage in data-flow order, every check before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specbench.errors import ConfigError
from specbench.importer.arms import arm_flags_of, choose_baseline, declare_speculation
from specbench.importer.mapping import resolve_columns
from specbench.importer.reading import file_format, read_table
from specbench.importer.rundir import build_manifest, build_records, write_run
from specbench.importer.values import field_table, require_measure, usable_rows


@dataclass(frozen=True)
class ImportResult:
    """What was written: the run directory, record count, records per arm, rows not imported."""

    out: Path
    records: int
    arms: dict[str, int]
    skipped: int
    baseline: str = ""
    columns: dict[str, str] = field(default_factory=dict)  # field → column (or "=constant") read


def import_file(
    path: Path,
    out: Path,
    *,
    mapping: dict[str, str] | None = None,
    flags: Sequence[str] = (),
    baseline: str | None = None,
    fmt: str | None = None,
    speculative: Sequence[str] = (),
    controls: Sequence[str] = (),
) -> ImportResult:
    """Read ``path``, validate everything, then write a run directory at ``out``.

    All checks run before anything is written, so a mistake in ``--map`` or ``--flags`` never
    leaves a half-made run directory behind.
    """
    fmt = file_format(path, fmt)
    raw = read_table(path, fmt)
    sources = resolve_columns(raw, mapping or {}, path.name)
    table, derived = field_table(raw, sources, path.name)
    require_measure(table, raw, path.name)
    table, skipped = usable_rows(table)
    if table.empty:
        raise ConfigError(f"{path.name}: no row has an arm, a prompt and a measured value")
    arm_flags = arm_flags_of(raw.loc[table.index], table, flags, path.name)
    arm_flags = declare_speculation(arm_flags, table, speculative, controls, path.name)
    base = choose_baseline(arm_flags, baseline, path.name)
    records = build_records(table, derived, path.name)
    columns = {name: src.describe() for name, src in sources.items()}
    manifest = build_manifest(path, fmt, arm_flags, base, table, columns, list(flags), skipped)
    write_run(path, out, manifest, records)
    counts = {arm: int((table["arm"] == arm).sum()) for arm in arm_flags}
    return ImportResult(out, len(records), counts, skipped, base, columns)
