"""Per-arm configuration: ``--flags`` columns become each arm's command-line flags; the baseline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from specbench.engines.openai import ImportedEngine
from specbench.errors import ConfigError
from specbench.importer.values import as_text, is_missing

#: Request settings that become per-arm flags when arms differ in them, so CONFOUND sees them.
REQUEST_FLAGS = {"max_tokens": "--max-tokens", "temperature": "--temperature"}
SPEC_WORDS = ("spec", "draft", "ngram", "mtp", "eagle", "medusa")
OFF_VALUES = frozenset({"", "none", "off", "false", "no", "0", "null", "nan", "disabled"})


def parse_columns(specs: Iterable[str]) -> list[str]:
    """``["a,b", "c"]`` → ``["a", "b", "c"]``: --flags may be given once with commas or repeated."""
    return [p.strip() for spec in specs for p in spec.split(",") if p.strip()]


def arm_flags_of(
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
    seen = {None if is_missing(v) else as_text(v) for v in values}
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
    return ",".join(as_text(v) for v in sorted(values.dropna().unique()))


def choose_baseline(arm_flags: dict[str, list[str]], given: str | None, name: str) -> str:
    """The given arm; else one named ``baseline``; else the only non-speculating arm; else the first."""
    arms = list(arm_flags)
    if given is not None:
        if given not in arm_flags:
            raise ConfigError(f"{name}: --baseline {given!r} is not an arm; arms: {', '.join(arms)}")
        return given
    if "baseline" in arm_flags:
        return "baseline"
    plain = [arm for arm, args in arm_flags.items() if not _ENGINE.speculates(args)]
    return plain[0] if len(plain) == 1 else arms[0]


_ENGINE = ImportedEngine()  # the run's engine: reads an imported arm's flags

#: The flag an imported arm gets when it speculates by declaration or by its draft columns, so
#: every check that asks "is this arm configured to speculate?" runs on it (no other flags exist).
DECLARED = "--spec-imported"


def declare_speculation(
    arm_flags: dict[str, list[str]],
    table: pd.DataFrame,
    speculative: Sequence[str],
    controls: Sequence[str],
    name: str,
) -> dict[str, list[str]]:
    """Mark arms that speculate: declared by ``--speculative``, else inferred from draft columns
    (any drafted token); ``--control`` arms (a baseline re-run) never are."""
    for arm in [*speculative, *controls]:
        if arm not in arm_flags:
            known = ", ".join(arm_flags)
            raise ConfigError(f"{name}: --speculative/--control {arm!r} is not an arm; arms: {known}")
    both = set(speculative) & set(controls)
    if both:
        raise ConfigError(f"{name}: arm {sorted(both)[0]!r} is given both --speculative and --control")
    out = {arm: list(args) for arm, args in arm_flags.items()}
    for arm, args in out.items():
        if arm in controls or _ENGINE.speculates(args):
            continue
        if arm in speculative:
            args += [DECLARED, "declared"]
        elif _drafted(table, arm):
            args += [DECLARED, "inferred-from-draft-columns"]
    return out


def _drafted(table: pd.DataFrame, arm: str) -> bool:
    if "draft_n" not in table:
        return False
    values = pd.to_numeric(table.loc[table["arm"] == arm, "draft_n"], errors="coerce")
    return bool((values.fillna(0) > 0).any())
