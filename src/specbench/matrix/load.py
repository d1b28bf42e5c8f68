"""A matrix file → a validated :class:`~specbench.matrix.config.Matrix` with every path it names resolved.

The one way a matrix enters specbench from disk: read guarded (:mod:`specbench.matrix.parse`),
validated by the model (:mod:`specbench.matrix.config`), its paths resolved against the file's
folder (:mod:`specbench.matrix.files`). A validation error names the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from specbench.errors import ConfigError
from specbench.matrix.config import Matrix, SLOSpec, WorkloadSpec
from specbench.matrix.files import resolve_matrix_files
from specbench.matrix.parse import parse_matrix_yaml, read_matrix_text
from specbench.matrix.tuneblock import TuneSpec
from specbench.store.paths import path_problem


def load_matrix(path: Path) -> Matrix:
    """Parse, validate and resolve relative paths against the matrix file's folder."""
    if not path_problem(str(path)) and not path.exists():
        raise ConfigError(f"{path}: no such matrix file")
    text = read_matrix_text(path)
    raw = parse_matrix_yaml(path, text)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a matrix must be a mapping with at least 'model' and 'arms'")
    try:
        matrix = Matrix.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_error(path, text, exc)) from exc
    return resolve_matrix_files(matrix, path.parent)


def _first_error(path: Path, text: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc) or "(top level)"
    line = _line_of(text, loc)
    where = f"{path}:{line}" if line else str(path)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown field (known: {', '.join(_known_fields(loc))})"
    if loc == ("repeats",) and err["type"].startswith("int_"):
        msg = f"a whole number of launches per arm, or auto; not {err['input']!r}"  # both forms it takes
    return f"{where}: {field}: {msg}"


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = WorkloadSpec if loc and loc[0] in ("workload", "workloads") else Matrix
    if loc and loc[0] == "slo":
        model = SLOSpec
    if loc and loc[0] == "tune":  # the tune block's own fields (docs/tune.md)
        model = TuneSpec if len(loc) == 2 else type(TuneSpec.model_fields["budget"].default)
    return sorted(model.model_fields)


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML key at ``loc`` (or of its deepest existing parent)."""
    node: Any = yaml.compose(text)
    line = None
    for key in loc:
        found = _child(node, key)
        if found is None:
            break
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _child(node: Any, key: Any) -> tuple[Any, Any] | None:
    """(key node, value node) of ``key`` inside a mapping or sequence node."""
    if isinstance(node, yaml.MappingNode):
        return next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(key)), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key], node.value[key]
    return None
