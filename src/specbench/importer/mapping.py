"""Which column is which field: the fields a record has, their default column names, and units."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from specbench.analysis.metrics import METRICS
from specbench.errors import ConfigError

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


@dataclass(frozen=True)
class Source:
    """Where one field comes from: a column scaled to specbench units, or a constant."""

    column: str | None
    scale: float = 1.0
    constant: str | None = None

    def describe(self) -> str:
        return f"={self.constant}" if self.column is None else self.column


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


def resolve_columns(raw: pd.DataFrame, mapping: dict[str, str], name: str) -> dict[str, Source]:
    """Explicit --map entries first, then the field's own name, then :data:`ALIASES`."""
    found = ", ".join(raw.columns)
    unknown = sorted(set(mapping) - set(FIELDS))
    if unknown:
        raise ConfigError(f"--map: unknown field {', '.join(unknown)} (fields: {', '.join(FIELDS)})")
    out: dict[str, Source] = {}
    for fld in FIELDS:
        if fld in mapping:
            out[fld] = _explicit(raw, fld, mapping[fld], name, found)
        else:
            column = _find(raw.columns, (fld, *ALIASES.get(fld, ())))
            if column is not None:
                out[fld] = Source(column, _scale(fld, column, None))
    missing = [f for f in REQUIRED if f not in out]
    if missing:
        fields = ", ".join(repr(f) for f in missing)
        hint = ",".join(f"{f}=COLUMN" for f in missing)
        raise ConfigError(f"{name}: no column for {fields} (use --map {hint}); columns found: {found}")
    return out


def _explicit(raw: pd.DataFrame, fld: str, spec: str, name: str, found: str) -> Source:
    if spec.startswith("="):
        return Source(None, constant=spec[1:])
    column, unit = spec, None
    head, _, tail = spec.rpartition(":")
    if head and tail.lower() in UNIT_MS:
        column, unit = head, tail.lower()
    if column not in raw.columns:
        raise ConfigError(f"{name}: --map {fld}={column}: no such column; columns found: {found}")
    return Source(column, _scale(fld, column, unit))


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
