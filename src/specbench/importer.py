"""Import per-request results written by other harnesses into a specbench run directory.

Published speculative-decoding numbers mostly come from shell scripts, ``vllm bench serve`` or
spreadsheets, not from specbench. Importing them into the run-directory layout lets the same
analysis (speedup with CI, SILENT_FALLBACK, ACCEPTANCE_ARTEFACT, CONFOUND, LOW_N, BIMODAL) judge
them. Nothing here measures: every value comes from the file, converted to specbench's units, and
each record says which file row it came from. See ``docs/import.md`` for the full contract.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench import SCHEMA_VERSION, checks
from specbench.errors import ConfigError
from specbench.metrics import METRICS
from specbench.store import RunStore, now_iso

FORMATS = ("csv", "tsv", "json", "jsonl")
_SUFFIX_FORMAT = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}

#: Default columns for each field, tried in order after the field's own name. A column nested in
#: JSON (``timings.draft_n``) also matches by its last segment (``draft_n``).
ALIASES: dict[str, tuple[str, ...]] = {
    "arm": ("config", "variant", "configuration", "arm_name"),
    "prompt": ("prompt_id", "question_id", "prompt_index", "request_index"),
    "decode_tok_s": ("predicted_per_second", "decode_tokens_per_second", "tokens_per_second", "tok_s"),
    "e2e_ms": ("e2el_ms", "e2e_latency_ms", "latency_ms", "e2els", "e2el", "latency"),
    "ttft_ms": ("ttfts", "ttft"),
    "tpot_ms": ("tpot",),
    "itl_ms": ("itl",),
    "prefill_ms": ("prompt_ms",),
    "prompt_tokens": ("input_lens", "input_len", "input_tokens", "prompt_len"),
    "output_tokens": ("completion_tokens", "output_lens", "output_len", "predicted_n", "generated_tokens"),
    "cached_tokens": ("cache_n",),
    "draft_n": ("draft_tokens", "num_draft_tokens", "drafted"),
    "draft_accepted": ("draft_n_accepted", "accepted_tokens", "num_accepted_tokens"),
    "max_tokens": ("n_predict", "max_new_tokens"),
    "temperature": ("temp",),
    "category": ("task",),
    "repeat": ("rep", "repetition", "iteration"),
    "workload": ("dataset",),
    "text": ("output_text", "generated_text", "generated_texts", "completion"),
    "error": ("errors",),
    "itls": (),
}
#: Fields that are not per-request metrics: identity, request settings, raw inputs to derivations.
OTHER_FIELDS = (
    "arm",
    "prompt",
    "max_tokens",
    "temperature",
    "category",
    "repeat",
    "workload",
    "text",
    "error",
    "itls",
)
FIELDS = (*OTHER_FIELDS, *METRICS)
NUMERIC = (*METRICS, "max_tokens", "temperature", "repeat")
REQUIRED = ("arm", "prompt")

#: Columns named like vLLM's detailed output hold seconds; everything else is read by suffix.
SECONDS_NAMES = frozenset({"ttft", "ttfts", "e2el", "e2els", "latency", "itl", "itls", "tpot"})
UNIT_MS = {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "secs": 1000.0, "seconds": 1000.0, "us": 1e-3, "ns": 1e-6}
#: Request settings that become per-arm flags when arms differ in them, so CONFOUND sees them.
REQUEST_FLAGS = {"max_tokens": "--max-tokens", "temperature": "--temperature"}
SPEC_WORDS = ("spec", "draft", "ngram", "mtp", "eagle", "medusa")
OFF_VALUES = frozenset({"", "none", "off", "false", "no", "0", "null", "nan", "disabled"})


@dataclass(frozen=True)
class ImportResult:
    """What was written: the run directory, record count, records per arm, rows not imported."""

    out: Path
    records: int
    arms: dict[str, int]
    skipped: int
    baseline: str = ""
    columns: dict[str, str] = field(default_factory=dict)  # field → column (or "=constant") read


@dataclass(frozen=True)
class _Source:
    """Where one field comes from: a column scaled to specbench units, or a constant."""

    column: str | None
    scale: float = 1.0
    constant: str | None = None

    def describe(self) -> str:
        return f"={self.constant}" if self.column is None else self.column


# -- public helpers for the CLI ---------------------------------------------------------------
def parse_map(specs: Iterable[str]) -> dict[str, str]:
    """``["arm=config,prompt=id", "e2e_ms=latency:s"]`` → mapping; ``arm==eagle`` is a constant."""
    out: dict[str, str] = {}
    for part in (p.strip() for spec in specs for p in spec.split(",")):
        if not part:
            continue
        name, sep, column = part.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise ConfigError(f"--map: {part!r} is not FIELD=COLUMN (fields: {', '.join(FIELDS)})")
        out[name.strip()] = column.strip()
    return out


def parse_columns(specs: Iterable[str]) -> list[str]:
    """``["a,b", "c"]`` → ``["a", "b", "c"]``: --flags may be given once with commas or repeated."""
    return [p.strip() for spec in specs for p in spec.split(",") if p.strip()]


# -- entry point ------------------------------------------------------------------------------
def import_file(
    path: Path,
    out: Path,
    *,
    mapping: dict[str, str] | None = None,
    flags: Sequence[str] = (),
    baseline: str | None = None,
    fmt: str | None = None,
) -> ImportResult:
    """Read ``path``, validate everything, then write a run directory at ``out``.

    All checks run before anything is written, so a mistake in ``--map`` or ``--flags`` never
    leaves a half-made run directory behind.
    """
    fmt = _format(path, fmt)
    raw = _read_table(path, fmt)
    sources = _resolve(raw, mapping or {}, path.name)
    table, derived = _fields(raw, sources, path.name)
    _require_measure(table, raw, path.name)
    table, skipped = _usable(table)
    if table.empty:
        raise ConfigError(f"{path.name}: no row has an arm, a prompt and a measured value")
    arm_flags = _arm_flags(raw.loc[table.index], table, flags, path.name)
    base = _baseline(arm_flags, baseline, path.name)
    records = _records(table, derived, path.name)
    columns = {name: src.describe() for name, src in sources.items()}
    manifest = _manifest(path, fmt, arm_flags, base, table, columns, list(flags), skipped)
    _write(path, out, manifest, records)
    counts = {arm: int((table["arm"] == arm).sum()) for arm in arm_flags}
    return ImportResult(out, len(records), counts, skipped, base, columns)


# -- reading ----------------------------------------------------------------------------------
def _format(path: Path, fmt: str | None) -> str:
    chosen = (fmt or _SUFFIX_FORMAT.get(path.suffix.lower(), "")).lower()
    if chosen not in FORMATS:
        raise ConfigError(
            f"{path.name}: cannot tell the format from the name; pass --format {'|'.join(FORMATS)}"
        )
    return chosen


def _read_table(path: Path, fmt: str) -> pd.DataFrame:
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


# -- which column is which field --------------------------------------------------------------
def _resolve(raw: pd.DataFrame, mapping: dict[str, str], name: str) -> dict[str, _Source]:
    """Explicit --map entries first, then the field's own name, then :data:`ALIASES`."""
    found = ", ".join(raw.columns)
    unknown = sorted(set(mapping) - set(FIELDS))
    if unknown:
        raise ConfigError(f"--map: unknown field {', '.join(unknown)} (fields: {', '.join(FIELDS)})")
    out: dict[str, _Source] = {}
    for fld in FIELDS:
        if fld in mapping:
            out[fld] = _explicit(raw, fld, mapping[fld], name, found)
        else:
            column = _find(raw.columns, (fld, *ALIASES.get(fld, ())))
            if column is not None:
                out[fld] = _Source(column, _scale(fld, column, None))
    missing = [f for f in REQUIRED if f not in out]
    if missing:
        fields = ", ".join(repr(f) for f in missing)
        hint = ",".join(f"{f}=COLUMN" for f in missing)
        raise ConfigError(f"{name}: no column for {fields} (use --map {hint}); columns found: {found}")
    return out


def _explicit(raw: pd.DataFrame, fld: str, spec: str, name: str, found: str) -> _Source:
    if spec.startswith("="):
        return _Source(None, constant=spec[1:])
    column, unit = spec, None
    head, _, tail = spec.rpartition(":")
    if head and tail.lower() in UNIT_MS:
        column, unit = head, tail.lower()
    if column not in raw.columns:
        raise ConfigError(f"{name}: --map {fld}={column}: no such column; columns found: {found}")
    return _Source(column, _scale(fld, column, unit))


def _find(columns: Iterable[str], names: Sequence[str]) -> str | None:
    """Exact name first, then a nested column whose last segment is the name (if unique)."""
    cols = list(columns)
    for want in names:
        if want in cols:
            return want
        nested = [c for c in cols if c.rsplit(".", 1)[-1] == want]
        if len(nested) == 1:
            return nested[0]
    return None


def _scale(fld: str, column: str, unit: str | None) -> float:
    """Factor to milliseconds for ``*_ms`` fields: the explicit unit, else the column's suffix
    (``_s``, ``_ns``…), else seconds for vLLM's names (``ttfts``, ``e2el``), else ms."""
    if not fld.endswith("_ms") and fld != "itls":
        return 1.0
    if unit is not None:
        return UNIT_MS[unit]
    base = column.rsplit(".", 1)[-1].lower()
    suffix = base.rsplit("_", 1)[-1] if "_" in base else ""
    if suffix in UNIT_MS:
        return UNIT_MS[suffix]
    return 1000.0 if base in SECONDS_NAMES else 1.0


# -- values -----------------------------------------------------------------------------------
def _fields(
    raw: pd.DataFrame, sources: dict[str, _Source], name: str
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
            table[fld] = raw[src.column].map(lambda v: None if _missing(v) else _text(v)).astype(object)
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
        values = pd.to_numeric(col.map(lambda v: np.nan if _missing(v) else v), errors="coerce")
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: column {column!r} ({fld}) does not hold numbers") from None
    bad = values.isna() & ~col.map(_missing).astype(bool)
    if bad.any():
        row = int(np.argmax(bad.to_numpy()))
        value = col.iloc[row]
        raise ConfigError(f"{name}: column {column!r} ({fld}) holds {value!r} in row {row}, not a number")
    return values.astype(float)


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


def _require_measure(table: pd.DataFrame, raw: pd.DataFrame, name: str) -> None:
    if "decode_tok_s" not in table and "e2e_ms" not in table:
        raise ConfigError(
            f"{name}: no column for 'decode_tok_s' or 'e2e_ms' (use --map decode_tok_s=COLUMN or "
            f"--map e2e_ms=COLUMN:s); columns found: {', '.join(raw.columns)}"
        )


def _usable(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows with an arm, a prompt and either a measured value or an error message."""
    measured = pd.Series(False, index=table.index)
    for fld in ("decode_tok_s", "e2e_ms"):
        if fld in table:
            measured |= table[fld].notna()
    if "error" in table:
        measured |= table["error"].notna()
    keep = table["arm"].notna() & table["prompt"].notna() & measured
    return table[keep], int((~keep).sum())


# -- per-arm configuration --------------------------------------------------------------------
def _arm_flags(
    raw: pd.DataFrame, table: pd.DataFrame, flags: Sequence[str], name: str
) -> dict[str, list[str]]:
    """``--flags`` columns as command-line flags per arm (arms in file order); request settings
    that differ between arms are added too, so CONFOUND sees them."""
    missing = [c for c in flags if c not in raw.columns]
    if missing:
        raise ConfigError(
            f"{name}: --flags column {missing[0]!r} not found; columns found: {', '.join(raw.columns)}"
        )
    arms = list(dict.fromkeys(table["arm"]))
    out: dict[str, list[str]] = {arm: [] for arm in arms}
    for column in flags:
        for arm in arms:
            value = _constant(raw.loc[table["arm"] == arm, column], column, arm, name)
            out[arm] += _flag(column, value)
    for fld, flag in REQUEST_FLAGS.items():
        if fld in table:
            values = {arm: _value_set(table.loc[table["arm"] == arm, fld]) for arm in arms}
            if len(set(values.values())) > 1:
                for arm, value in values.items():
                    out[arm] += [flag, value] if value else []
    return out


def _constant(values: pd.Series, column: str, arm: str, name: str) -> str | None:
    """An arm is one configuration: a flag column must hold one value for all its rows."""
    seen = {None if _missing(v) else _text(v) for v in values}
    if len(seen) > 1:
        shown = ", ".join(sorted("(empty)" if v is None else v for v in seen))
        raise ConfigError(
            f"{name}: --flags column {column!r} is not constant within arm {arm!r} ({shown}); "
            "split the arm or leave the column out of --flags"
        )
    return next(iter(seen))


def _flag(column: str, value: str | None) -> list[str]:
    """``gpu_memory_utilization`` → ``--gpu-memory-utilization``; speculative-looking names get
    ``--spec-`` so they are speculative flags, and their "off" values (none, 0, false) drop out."""
    stem = column.strip().lstrip("-").replace("_", "-").replace(" ", "-").lower()
    if not any(word in stem for word in SPEC_WORDS):
        return [] if value is None else [f"--{stem}", value]
    if value is None or value.lower() in OFF_VALUES:
        return []
    return [f"--spec-{stem.removeprefix('spec-')}", value]


def _value_set(values: pd.Series) -> str:
    return ",".join(_text(v) for v in sorted(values.dropna().unique()))


def _baseline(arm_flags: dict[str, list[str]], given: str | None, name: str) -> str:
    """The given arm; else one named ``baseline``; else the only non-speculating arm; else the first."""
    arms = list(arm_flags)
    if given is not None:
        if given not in arm_flags:
            raise ConfigError(f"{name}: --baseline {given!r} is not an arm; arms: {', '.join(arms)}")
        return given
    if "baseline" in arm_flags:
        return "baseline"
    plain = [arm for arm, args in arm_flags.items() if not checks.speculates(args)]
    return plain[0] if len(plain) == 1 else arms[0]


# -- writing ----------------------------------------------------------------------------------
def _records(table: pd.DataFrame, derived: dict[str, list[int]], name: str) -> list[dict[str, Any]]:
    """One record per row, in file order (``seq``): the only order an imported file records."""
    repeats = table.groupby(["arm", "prompt"], sort=False).cumcount().tolist()
    by_row: dict[int, list[str]] = {}
    for fld, rows in derived.items():
        for row in rows:
            by_row.setdefault(row, []).append(fld)
    out = []
    items = zip(table.index.tolist(), table.to_dict("records"), repeats, strict=True)
    for seq, (row, values, occurrence) in enumerate(items, start=1):
        given = _num(values.get("repeat"))
        rec = _record(values, seq, int(given) if given is not None else int(occurrence))
        rec["source"] = {"file": name, "row": int(row), "derived": by_row.get(int(row), [])}
        out.append(rec)
    return out


def _record(row: dict[Any, Any], seq: int, repeat: int) -> dict[str, Any]:
    """The shape of a native record (runner.Runner._one) with ``imported`` values instead of
    raw chunks; metrics.frame prefers ``imported`` over anything computed from chunks."""
    num = {f: _num(row.get(f)) for f in NUMERIC}
    usage = {"prompt_tokens": num["prompt_tokens"], "completion_tokens": num["output_tokens"]}
    rec: dict[str, Any] = {
        "arm": row["arm"],
        "repeat": repeat,
        "workload": _str_or(row.get("workload"), "imported"),
        "prompt_id": row["prompt"],
        "category": _str_or(row.get("category"), "imported"),
        "warmup": False,
        "seq": seq,
        "error": _str_or(row.get("error"), None),
        "request": {"max_tokens": _int(num["max_tokens"]), "temperature": num["temperature"]},
        "usage": {k: int(v) for k, v in usage.items() if v is not None},
        "chunks": _text_chunks(_str_or(row.get("text"), None), num["ttft_ms"]),
        "imported": {f: num[f] for f in METRICS if num[f] is not None},
    }
    if num["draft_n"] is not None:
        rec["timings"] = {"draft_n": int(num["draft_n"])}
        if num["draft_accepted"] is not None:
            rec["timings"]["draft_n_accepted"] = int(num["draft_accepted"])
    return rec


def _text_chunks(text: str | None, ttft_ms: float | None) -> list[list[Any]]:
    """Output text, when the file has it, as one chunk so OUTPUT_DRIFT can compare arms. Its time
    is the file's TTFT, or NaN when unknown, so no latency is invented."""
    if text is None:
        return []
    t_ns = ttft_ms * 1e6 if ttft_ms is not None else float("nan")
    return [[t_ns, text, None, None, None]]


def _manifest(
    path: Path,
    fmt: str,
    arm_flags: dict[str, list[str]],
    base: str,
    table: pd.DataFrame,
    columns: dict[str, str],
    flags: list[str],
    skipped: int,
) -> dict[str, Any]:
    names = table["workload"].map(lambda w: _str_or(w, "imported")) if "workload" in table else ["imported"]
    workloads = sorted({str(w) for w in names})
    return {
        "imported": True,
        "matrix": {
            "engine": "imported",
            "model": "",
            "common_args": [],
            "arms": arm_flags,
            "baseline": base,
            "workload": {
                "name": ",".join(workloads),
                "source": str(path),
                "format": fmt,
                "columns": columns,
                "flags": flags,
                "rows": int(len(table) + skipped),
                "skipped": skipped,
            },
        },
    }


def _write(path: Path, out: Path, manifest: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Manifest, a copy of the source file, an env that says the machine is unknown, records."""
    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(out)
    store.create(manifest, resume=False)
    (out / "source").mkdir(exist_ok=True)
    shutil.copy2(path, out / "source" / path.name)
    store.write_env(
        {
            "imported": True,
            "note": "imported results: the measuring machine is not recorded here",
            "source_file": str(path),
            "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "schema_version": SCHEMA_VERSION,
            "captured_at": now_iso(),
        }
    )
    _write_records(store, records)
    for arm in manifest["matrix"]["arms"]:
        store.set_arm_status(arm, status="imported")
    store.update_manifest(finished_at=now_iso())


def _write_records(store: RunStore, records: list[dict[str, Any]]) -> None:
    """The lines RunStore.append_record writes, with one fsync at the end: per-record fsync
    protects a live measurement from a crash, but an import can simply be run again (and a
    5000-row file took 20 s with it)."""
    lines = (json.dumps({"schema_version": SCHEMA_VERSION, **rec}, default=str) + "\n" for rec in records)
    with store.records_path.open("a") as fh:
        fh.writelines(lines)
        fh.flush()
        os.fsync(fh.fileno())


# -- small value helpers ----------------------------------------------------------------------
def _missing(value: Any) -> bool:
    if isinstance(value, list | dict | tuple):
        return False
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    return bool(pd.isna(value))


def _text(value: Any) -> str:
    """A value as written: floats that are whole numbers lose the ``.0`` JSON/pandas gave them."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _str_or(value: Any, default: str | None) -> str | None:
    return default if _missing(value) else str(value)


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
