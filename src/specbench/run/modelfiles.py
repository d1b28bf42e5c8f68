"""The model files a run loads are whole before anything launches.

A GGUF cut short (an interrupted download or copy) has a header that reads well: without this
check a dry run planned "CPU decode of a 10 MB model" from the first 10 MB of a 400 MB file, and
the run found out only when llama.cpp refused it at load time, arm after arm. Every GGUF the
matrix names — ``model`` and each file flag of the arms (which flags take files is the engine's
knowledge: :attr:`specbench.engines.base.Engine.file_flags`) — must hold all of its tensor data
(:func:`specbench.theory.gguf_header.tensor_data_problem`). Files that are not GGUF (a vLLM
model folder, a chat template) are the engine's to read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from specbench.engines import ENGINES
from specbench.errors import ConfigError
from specbench.matrix.config import Matrix
from specbench.store.redact import SECRET_FILE_FLAGS
from specbench.theory.gguf_header import tensor_data_problem

GGUF_MAGIC = b"GGUF"


def check_model_files(matrix: Matrix) -> None:
    """ConfigError naming the field (or arm and flag) and the file for a GGUF whose tensor data
    does not fit it, or whose header is cut short; each file is read once."""
    seen: set[str] = set()
    for where, value in model_files(matrix):
        if value in seen:
            continue
        seen.add(value)
        problem = _gguf_problem(Path(value))
        if problem:
            raise ConfigError(f"{where}: {value}: {problem}")


def model_files(matrix: Matrix) -> Iterator[tuple[str, str]]:
    """(where the matrix names it, path) of the target and of every file-valued flag."""
    if matrix.model:
        yield "model", matrix.model
    # A key file is read by the engine only: specbench does not open it, even for four bytes.
    flags = ENGINES[matrix.engine].file_flags - SECRET_FILE_FLAGS
    for flag, value in file_flag_values(matrix.common_args, flags):
        yield f"common_args (every arm): {flag}", value
    for arm, args in matrix.arms.items():
        for flag, value in file_flag_values(args, flags):
            yield f"arms.{arm}: {flag}", value


def file_flag_values(args: Sequence[str], flags: frozenset[str]) -> Iterator[tuple[str, str]]:
    """Both spellings, ``--flag value`` and ``--flag=value``."""
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if eq and name in flags:
            yield name, inline
        elif arg in flags and i + 1 < len(args):
            yield arg, args[i + 1]


def _gguf_problem(path: Path) -> str | None:
    """Why GGUF ``path`` cannot be loaded whole (None: it can, or it is no GGUF at all)."""
    try:
        with path.open("rb") as fh:
            if fh.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
                return None
    except OSError:  # not a readable file (a hub id, a folder): the engine names what it lacks
        return None
    return tensor_data_problem(path)
