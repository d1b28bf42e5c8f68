"""Reading the input file: CSV, TSV, JSON or JSONL → one row per request, columns as named there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.errors import ConfigError

FORMATS = ("csv", "tsv", "json", "jsonl")
_SUFFIX_FORMAT = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def file_format(path: Path, fmt: str | None) -> str:
    chosen = (fmt or _SUFFIX_FORMAT.get(path.suffix.lower(), "")).lower()
    if chosen not in FORMATS:
        raise ConfigError(
            f"{path.name}: cannot tell the format from the name; pass --format {'|'.join(FORMATS)}"
        )
    return chosen


def read_table(path: Path, fmt: str) -> pd.DataFrame:
    """One row per request, columns as the file names them (nested JSON keys joined by dots)."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        if fmt in ("csv", "tsv"):
            # Strings throughout: flag values and prompt ids stay exactly as written ("0.80", "007").
            df = pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", dtype=str, skipinitialspace=True)
        elif fmt == "jsonl":
            lines = pd.read_json(path, lines=True, dtype=False)
            df = pd.json_normalize([{str(k): v for k, v in r.items()} for r in lines.to_dict("records")])
        else:
            df = _json_rows(json.loads(path.read_text()), path.name)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path.name}: not readable as {fmt}: {first}") from exc
    if df.empty:
        raise ConfigError(f"{path.name}: no rows")
    df.columns = [str(c).strip() for c in df.columns]
    return df.reset_index(drop=True)


def _json_rows(obj: Any, name: str) -> pd.DataFrame:
    """An array of objects, an object of parallel per-request arrays (``vllm bench serve
    --save-detailed``), or an object of such objects keyed by arm name."""
    if isinstance(obj, list):
        return pd.json_normalize([r if isinstance(r, dict) else {"value": r} for r in obj])
    if not isinstance(obj, dict):
        raise ConfigError(f"{name}: expected a JSON array of objects or an object of per-request arrays")
    lists = [v for v in obj.values() if isinstance(v, list) and v]
    if len(lists) == 1 and all(isinstance(r, dict) for r in lists[0]):
        return pd.json_normalize(lists[0])  # {"results": [{...}, ...]}
    parallel = _parallel_rows(obj)
    if parallel is not None:
        return parallel
    nested = {k: _parallel_rows(v) for k, v in obj.items() if isinstance(v, dict)}
    frames = [df.assign(arm=str(k)) for k, df in nested.items() if df is not None]
    if not frames:
        raise ConfigError(f"{name}: the JSON object holds no per-request arrays (lists of equal length)")
    return pd.concat(frames, ignore_index=True)


def _parallel_rows(obj: dict[str, Any]) -> pd.DataFrame | None:
    """Lists of the most common length become columns; scalars repeat on every row, so a
    top-level ``model_id`` or ``label`` can be mapped like any column."""
    lengths = [len(v) for v in obj.values() if isinstance(v, list) and v]
    if not lengths:
        return None
    counts = pd.Series(lengths).value_counts()
    n = int(max(counts[counts == counts.max()].index))
    cols: dict[str, Any] = {k: v for k, v in obj.items() if isinstance(v, list) and len(v) == n}
    scalars = {k: v for k, v in obj.items() if not isinstance(v, list | dict) and k not in cols}
    df = pd.DataFrame({**{k: [v] * n for k, v in scalars.items()}, **cols})
    if "request_index" not in df.columns:
        df["request_index"] = np.arange(n)
    return df
