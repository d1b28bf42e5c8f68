"""Strings that become file names, argv words or environment entries, checked where they enter.

Arm and workload names name files in the run directory; arguments and environment values are
handed to ``execve``, which cannot pass a NUL byte and splits ``NAME=VALUE`` at the first ``=``;
paths must be short enough for the kernel. Each check raises ValueError with what is wrong (the
config's validators add the file, line and field).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from specbench.store.paths import path_problem

MAX_NAME = 64  # arm and workload names; they become parts of file names (NAME_MAX is 255 bytes)


def check_arm_name(name: str) -> str:
    """Arm names become file names (logs, scrapes): letters, digits, '-' and '_' only, and short
    enough that ``<arm>-r<repeat>-<phase>.json`` stays a valid file name."""
    if not name or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
        raise ValueError(f"arm names may use letters, digits, '-' and '_' only: {name!r}")
    if len(name) > MAX_NAME:
        raise ValueError(f"names may be at most {MAX_NAME} characters long, got {len(name)}: {name[:20]!r}…")
    return name


def no_nul(values: Iterable[str], where: str) -> None:
    """A NUL byte cannot pass through argv or the environment: exec would refuse the engine."""
    bad = next((i for i, v in enumerate(values) if "\x00" in v), None)
    if bad is not None:  # named by position: the value may be a key, and errors are printed
        raise ValueError(f"{where}argument {bad + 1} holds a NUL byte, which no program can be given")


def path_ok(value: str | None) -> str | None:
    problem = path_problem(value) if value else None
    if problem:
        raise ValueError(f"the path {problem}")
    return value


def check_env(env: Mapping[str, str]) -> dict[str, str]:
    """What execve accepts: a name, non-empty, without '=' or NUL; a value without NUL (named by
    its variable, never shown: it may be a key)."""
    for name, value in env.items():
        if not name or "=" in name or "\x00" in name:
            raise ValueError(f"{name!r} is not an environment variable name (non-empty, no '=')")
        if "\x00" in value:
            raise ValueError(f"{name}: the value holds a NUL byte, which no program can be given")
    return dict(env)
