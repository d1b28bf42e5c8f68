"""The argument table a run was checked against, kept in its run directory.

A report is recomputed from the run directory alone: ``CONFOUND`` compares arms by what their
flags mean (aliases, values, speculative sections), so the table that says so is stored with the
run (``engine_args.json``, written with ``env.json`` when the run is made) and read back from
there, never from whatever llama.cpp or vLLM is installed where the report is made (another
build, none at all, or a ``vllm serve --help=all`` of minutes inside ``report``). A run made
without a table (the engine's help could not be read, an attached server) stores that too:
it is then compared by spelling, wherever it is read. Only a run made before this file existed
falls back to the engine found at report time.

The file is compact JSON: the table's parser rules, then one object per option with only what
differs from the defaults (canonical name, other spellings, value count, choices, section).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.engines.argtable import ArgSpec, ArgTable
from specbench.errors import StoreError

ARGS_FILE = "engine_args.json"
FORMAT = 1
_RULES = ("equals", "underscores", "dotted", "abbrev", "positionals", "exact_case", "attached_short")


@dataclass(frozen=True)
class StoredArgs:
    """What a run directory says of its engine's argument table: the table, or None where the
    run had none (flags were then compared by spelling)."""

    table: ArgTable | None


def dumps(table: ArgTable | None) -> str:
    """The file's text for ``table`` (None: the run had no table)."""
    body = None if table is None else _table_json(table)
    return json.dumps({"format": FORMAT, "table": body}, separators=(",", ":"), sort_keys=True)


def _table_json(table: ArgTable) -> dict[str, Any]:
    return {
        "program": table.program,
        **{rule: getattr(table, rule) for rule in _RULES},
        "spec_sections": list(table.spec_sections),
        "rewrites": dict(table.rewrites),
        "options": [_spec_json(s) for s in table.specs],
    }


def _spec_json(spec: ArgSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"canonical": spec.canonical, "names": list(spec.names)}
    extra = {
        "negatives": list(spec.negatives),
        "nargs": spec.nargs,
        "optional_value": spec.optional_value,
        "more_values": spec.more_values,
        "choices": list(spec.choices),
        "choice_list": spec.choice_list,
        "synonyms": dict(spec.synonyms),
        "section": spec.section,
    }
    return out | {k: v for k, v in extra.items() if v}


def loads(text: str) -> StoredArgs:
    """The file's text back into a table; ValueError for anything else (damaged, another format)."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != FORMAT or "table" not in data:
        raise ValueError(f"not format {FORMAT}")
    body = data["table"]
    return StoredArgs(None if body is None else _table(_mapping(body)))


def _table(body: Mapping[str, Any]) -> ArgTable:
    rule = {name: _bool(body.get(name, False)) for name in _RULES}
    return ArgTable(
        str(body["program"]),
        tuple(_spec(_mapping(s)) for s in _list(body["options"])),
        equals=rule["equals"],
        underscores=rule["underscores"],
        dotted=rule["dotted"],
        abbrev=rule["abbrev"],
        positionals=rule["positionals"],
        spec_sections=_strings(body.get("spec_sections", [])),
        exact_case=rule["exact_case"],
        attached_short=rule["attached_short"],
        rewrites={str(k): str(v) for k, v in _mapping(body.get("rewrites", {})).items()},
    )


def _spec(raw: Mapping[str, Any]) -> ArgSpec:
    nargs = raw.get("nargs", 0)
    if not isinstance(nargs, int) or isinstance(nargs, bool) or nargs < 0:
        raise ValueError(f"nargs {nargs!r}")
    return ArgSpec(
        canonical=str(raw["canonical"]),
        names=_strings(raw["names"]),
        negatives=_strings(raw.get("negatives", [])),
        nargs=nargs,
        optional_value=_bool(raw.get("optional_value", False)),
        more_values=_bool(raw.get("more_values", False)),
        choices=_strings(raw.get("choices", [])),
        choice_list=_bool(raw.get("choice_list", False)),
        synonyms={str(k): str(v) for k, v in _mapping(raw.get("synonyms", {})).items()},
        section=str(raw.get("section", "")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("an object was expected")
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("a list was expected")
    return value


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in _list(value))


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value


def read(run_dir: Path) -> StoredArgs | None:
    """The table stored in ``run_dir`` (None: none stored, a run made before tables were kept).
    A damaged file is a one-line StoreError naming it (exit 5), as a damaged ``env.json`` is."""
    path = run_dir / ARGS_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return loads(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"{path}: damaged ({exc}); delete it to compare the arms by the engine installed here"
        ) from exc
