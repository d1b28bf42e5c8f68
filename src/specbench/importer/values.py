"""Values: the raw frame → one column per field in specbench units, derived latencies, usable rows;
and the small helpers that read one cell."""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np
import pandas as pd

from specbench.errors import ConfigError
from specbench.importer.mapping import NUMERIC, Source


def field_table(
    raw: pd.DataFrame, sources: dict[str, Source], name: str
) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """A frame with one column per resolved field, in specbench units, plus derived values."""
    table = pd.DataFrame(index=raw.index)
    for fld, src in sources.items():
        if src.column is None:
            table[fld] = _constant_value(fld, str(src.constant), name)
        elif fld in NUMERIC:
            table[fld] = _numeric(raw[src.column], fld, src.column, name) * src.scale
        elif fld == "itls":
            table[fld] = raw[src.column].map(lambda v, s=src.scale: _window_ms(v, s))
        else:
            table[fld] = raw[src.column].map(lambda v: None if is_missing(v) else as_text(v)).astype(object)
    _check_drafts(table, sources, name)
    return _derive(table)


def _constant_value(fld: str, value: str, name: str) -> Any:
    if fld not in NUMERIC:
        return value
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}: --map {fld}={value!r} is a constant but not a number") from None


def _numeric(col: pd.Series, fld: str, column: str, name: str) -> pd.Series:
    try:
        values = pd.to_numeric(col.map(lambda v: np.nan if is_missing(v) else v), errors="coerce")
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: column {column!r} ({fld}) does not hold numbers") from None
    bad = values.isna() & ~col.map(is_missing).astype(bool)
    if bad.any():
        row = int(np.argmax(bad.to_numpy()))
        value = col.iloc[row]
        raise ConfigError(f"{name}: column {column!r} ({fld}) holds {value!r} in row {row}, not a number")
    # Every imported field is a rate, a time, a count or a setting: a negative or infinite one is
    # a broken export, and taken in silently it would move a median or a speedup.
    wrong = values.notna() & ~(np.isfinite(values) & (values >= 0))
    if wrong.any():
        row = int(np.argmax(wrong.to_numpy()))
        value = col.iloc[row]
        raise ConfigError(
            f"{name}: column {column!r} ({fld}) holds {value!r} in row {row}, not a finite number >= 0"
        )
    return values.astype(float)


def _check_drafts(table: pd.DataFrame, sources: dict[str, Source], name: str) -> None:
    """A request cannot accept more draft tokens than were drafted: such a row is two columns
    mapped the wrong way round, or counters of different things."""
    if "draft_n" not in table or "draft_accepted" not in table:
        return
    over = (table["draft_accepted"] > table["draft_n"]).to_numpy()
    if over.any():
        row = int(np.argmax(over))
        accepted, drafted = (sources[f].describe() for f in ("draft_accepted", "draft_n"))
        a, d = table["draft_accepted"].iloc[row], table["draft_n"].iloc[row]
        raise ConfigError(
            f"{name}: row {row}: column {accepted!r} (draft_accepted) = {a:g} "
            f"is more than column {drafted!r} (draft_n) = {d:g}"
        )


def _window_ms(value: Any, scale: float) -> float:
    """vLLM ``itls``: the gaps between streamed chunks after the first; their sum is the
    decode window (first to last token)."""
    if not isinstance(value, list) or not value:
        return float("nan")
    return float(np.sum(np.asarray(value, dtype=float))) * scale


def _derive(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """Fill e2e_ms, decode_tok_s and tpot_ms from ttft + decode window where the file lacks them,
    with specbench's definitions (decode = (output_tokens − 1) / (t_last − t_first))."""
    nan = pd.Series(np.nan, index=table.index)
    window = table.get("itls", nan)
    ttft = table.get("ttft_ms", nan)
    window = window.fillna(table.get("e2e_ms", nan) - ttft)
    out_tokens = table.get("output_tokens", nan)
    derived: dict[str, list[int]] = {}
    for fld, values in (
        ("e2e_ms", ttft + window),
        ("decode_tok_s", (out_tokens - 1) * 1000.0 / window),
        ("tpot_ms", window / (out_tokens - 1)),
    ):
        values = values.where(np.isfinite(values) & (values > 0))
        old = table.get(fld, nan)
        filled = old.isna() & values.notna()
        if filled.any():
            table[fld] = old.fillna(values)
            derived[fld] = [int(i) for i in table.index[filled]]
    return table.drop(columns=["itls"], errors="ignore"), derived


def require_measure(table: pd.DataFrame, raw: pd.DataFrame, name: str) -> None:
    if "decode_tok_s" not in table and "e2e_ms" not in table:
        raise ConfigError(
            f"{name}: no column for 'decode_tok_s' or 'e2e_ms' (use --map decode_tok_s=COLUMN or "
            f"--map e2e_ms=COLUMN:s); columns found: {', '.join(raw.columns)}"
        )


def usable_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows with an arm, a prompt and either a measured value or an error message."""
    measured = pd.Series(False, index=table.index)
    for fld in ("decode_tok_s", "e2e_ms"):
        if fld in table:
            measured |= table[fld].notna()
    if "error" in table:
        measured |= table["error"].notna()
    keep = table["arm"].notna() & table["prompt"].notna() & measured
    return table[keep], int((~keep).sum())


# -- one cell ---------------------------------------------------------------------------------
def is_missing(value: Any) -> bool:
    if isinstance(value, list | dict | tuple):
        return False
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    return bool(pd.isna(value))


def as_text(value: Any) -> str:
    """A value as written: floats that are whole numbers lose the ``.0`` JSON/pandas gave them."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


@overload
def str_or(value: Any, default: str) -> str: ...
@overload
def str_or(value: Any, default: None) -> str | None: ...
def str_or(value: Any, default: str | None) -> str | None:
    return default if is_missing(value) else str(value)


def as_num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def as_int(value: float | None) -> int | None:
    return None if value is None else int(value)
