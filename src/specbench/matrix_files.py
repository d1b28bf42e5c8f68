"""Every file a matrix names resolves one way: against the matrix file's folder.

A matrix that works from one working directory must work from any other, so ``model``, the
file-valued flags of ``common_args`` and the arms (which flags take files is the engine class's
knowledge: :attr:`specbench.engines.base.Engine.file_flags`) and ``env`` values written as
``./x`` or ``../x`` all become absolute paths here. A missing file is a one-line ConfigError that
names the arm and the flag, raised before any engine starts, instead of the engine's usage text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.engines import ENGINES
from specbench.engines.base import Engine
from specbench.errors import ConfigError
from specbench.lab.real import BUNDLED_PREFIX, bundled_template
from specbench.paths import path_problem
from specbench.workloads.prompts import file_kind

if TYPE_CHECKING:
    from specbench.config import Matrix

PATH_PREFIXES = ("/", "./", "../", "~")
ENV_PREFIXES = ("./", "../")  # only explicitly relative env values are paths: PATH-like lists are not


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
        local = base / Path(value).expanduser()
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
    path = base / value
    if path_problem(str(path)):
        raise ConfigError(f"env.{key}: the path {path_problem(str(path))}")
    if not path.exists():
        raise ConfigError(
            f"env.{key}: no such file {path} (relative paths resolve against the matrix file's folder)"
        )
    return str(path.resolve())
