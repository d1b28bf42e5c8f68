"""Every file a matrix names resolves one way: against the matrix file's folder.

A matrix that works from one working directory must work from any other, so ``model``, the
file-valued flags of ``common_args`` and the arms (which flags take files is the engine class's
knowledge: :attr:`specbench.engines.base.Engine.file_flags`) and ``env`` values written as
``./x`` or ``../x`` all become absolute paths here. A missing file is a one-line ConfigError that
names the arm and the flag, raised before any engine starts, instead of the engine's usage text.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.engines import ENGINES
from specbench.engines.base import Engine
from specbench.errors import ConfigError
from specbench.lab.real import BUNDLED_PREFIX, bundled_template
from specbench.store.paths import path_problem

if TYPE_CHECKING:
    from specbench.matrix.config import Matrix

PATH_PREFIXES = ("/", "./", "../", "~")
ENV_PREFIXES = ("./", "../")  # only explicitly relative env values are paths: PATH-like lists are not


def matrix_path(base: Path, value: str) -> Path:
    """A path a matrix names, as the matrix means it: ``~`` expanded, absolute as written, else
    against the matrix file's folder ``base``. Every reader of a path a matrix names (the model,
    file flags, env values, prompt files, tune's draft models) resolves it here."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def resolve_matrix_files(matrix: Matrix, base: Path) -> Matrix:
    """``matrix`` with every file path absolute; ConfigError naming the field for a missing one."""
    cls = ENGINES[matrix.engine]
    if not cls.launches:
        return matrix  # attach mode: the server runs elsewhere, with its own files
    model = _resolver(cls, base, "model")(matrix.model) if matrix.model else matrix.model
    common = _args(cls, base, matrix.common_args, "common_args (every arm)")
    arms = {name: _args(cls, base, args, f"arms.{name}") for name, args in matrix.arms.items()}
    env = {key: _env_value(base, key, value) for key, value in matrix.env.items()}
    return matrix.model_copy(update={"model": model, "common_args": common, "arms": arms, "env": env})


def _args(cls: type[Engine], base: Path, args: tuple[str, ...], where: str) -> tuple[str, ...]:
    """Both spellings: ``--flag value`` and ``--flag=value``."""
    out = list(args)
    for i, arg in enumerate(args):
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            out[i] = f"{flag}={cls.resolve_files(flag, value, _resolver(cls, base, f'{where}: {flag}'))}"
        elif i + 1 < len(args) and not _is_flag(args[i + 1]):
            out[i + 1] = cls.resolve_files(arg, args[i + 1], _resolver(cls, base, f"{where}: {arg}"))
    return tuple(out)


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and not arg[1:2].isdigit()


def _resolver(cls: type[Engine], base: Path, where: str) -> Callable[[str], str]:
    def resolve(value: str) -> str:
        if value.startswith(BUNDLED_PREFIX):  # a file specbench ships, named: specbench:plain.jinja
            try:
                return str(bundled_template(value.removeprefix(BUNDLED_PREFIX)))
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        problem = path_problem(value)
        if problem:  # a 5,000-character path fails inside stat() with ENAMETOOLONG
            raise ConfigError(f"{where}: the path {problem}")
        local = matrix_path(base, value)
        if path_problem(str(local)):
            raise ConfigError(f"{where}: the path {path_problem(str(local))} once joined to {base}")
        if cls.hub_ids and not value.startswith(PATH_PREFIXES) and not local.exists():
            return value  # a hub id such as org/model: the engine downloads it
        if not local.exists():
            raise ConfigError(
                f"{where}: no such file {local} (relative paths resolve against the matrix file's folder)"
            )
        if not cls.hub_ids and not local.is_file():  # llama.cpp reads files; vLLM reads model folders
            raise ConfigError(f"{where}: {local} is {file_kind(local.stat().st_mode)}, not a regular file")
        return str(local.resolve())

    return resolve


def _env_value(base: Path, key: str, value: str) -> str:
    if not value.startswith(ENV_PREFIXES):
        return value
    path = matrix_path(base, value)
    if path_problem(str(path)):
        raise ConfigError(f"env.{key}: the path {path_problem(str(path))}")
    if not path.exists():
        raise ConfigError(
            f"env.{key}: no such file {path} (relative paths resolve against the matrix file's folder)"
        )
    return str(path.resolve())


def read_regular(path: Path, limit: int, what: str) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes; ConfigError naming
    ``path`` otherwise. Opened without blocking and checked before reading: a FIFO would block
    ``open`` until a writer came, and ``/dev/zero`` would be read until memory ran out."""
    problem = path_problem(str(path))
    if problem:
        raise ConfigError(f"{what} {_short(path)}: the path {problem}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the {what}: {err.strerror or err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigError(f"{path}: the {what} must be a regular file, not {file_kind(info.st_mode)}")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{path}: the {what} is larger than {limit // (1024 * 1024)} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: cannot read the {what}: not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words, for an error line."""
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _short(path: Path, width: int = 80) -> str:
    """A path cut for an error line (a 5,000-character path would bury the message)."""
    text = str(path)
    return text if len(text) <= width else text[: width - 1] + "…"


# --- row validation -------------------------------------------------------------------
