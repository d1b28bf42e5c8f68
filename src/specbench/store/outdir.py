"""The run directory a command is given (``--out``), checked before anything is read or launched.

``run`` and ``run --dry-run`` call the same checks, so a dry run refuses what the run would:
a path the kernel cannot take, a place that cannot be written (a read-only file system), a
``--resume`` of a directory that holds no run or whose journal is not a file, a directory locked
by another run. Each is one line naming ``--out`` with exit 2 (the flag is wrong) or 5 (the
directory is: missing, damaged, locked or not writable).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from specbench.errors import ConfigError, StoreError
from specbench.store.paths import path_problem

JOURNALS = ("records.jsonl", "cells.jsonl")


def out_path(text: str, flag: str = "--out") -> Path:
    """``--out`` as typed: an empty one is an error, not the current directory (``Path('')``
    is ``.``, where a run would scatter its files among the user's)."""
    if not text.strip():
        raise ConfigError(f"{flag}: empty; give the directory to write, e.g. {flag} runs/mine")
    problem = path_problem(text)
    if problem:
        raise ConfigError(f"{flag}: the path {problem}")
    return Path(text)


def folder_out(text: str, flag: str = "--out") -> Path:
    """An output folder that is not a run directory (``lab make``): it may exist, as a folder,
    and must be writable; a wrong one is a wrong flag (exit 2)."""
    out = out_path(text, flag)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out}: exists and is not a folder; give a folder to write into")
    try:
        _check_writable(out)
    except StoreError as exc:
        raise ConfigError(str(exc).replace("--out", flag, 1)) from None
    return out


def check_run_dir(out: Path, *, resume: bool) -> None:
    """What ``run`` refuses about ``out`` before its first launch (dry runs included)."""
    problem = path_problem(str(out))
    if problem:
        raise ConfigError(f"--out: the path {problem}")
    if out.exists() and not out.is_dir():
        raise StoreError(f"--out {out}: not a directory")
    manifest = out / "manifest.json"
    if not resume and manifest.exists():
        raise StoreError(f"{out} already holds a run: pass --resume to continue it, or another --out")
    if resume and not manifest.is_file():
        raise StoreError(f"--resume: {out} holds no run (no manifest.json); drop --resume to start one there")
    if resume:
        for name in JOURNALS:
            path = out / name
            if path.exists() and not path.is_file():
                raise StoreError(f"{path}: not a regular file, so the run cannot be continued; move it away")
    _check_writable(out)
    check_unlocked(out)


def _check_writable(out: Path) -> None:
    """The directory (or, for a new one, its nearest existing parent) can be written."""
    where = out
    while not where.exists() and where != where.parent:
        where = where.parent
    if os.access(where, os.W_OK | os.X_OK):
        return
    why = "permission denied"
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            why = "read-only file system"
    except OSError:
        pass
    raise StoreError(f"--out {out}: cannot write in {where} ({why}); choose another --out")


def check_unlocked(out: Path) -> None:
    """StoreError when another specbench holds ``out``'s lock (see store.RunStore.lock); the
    lock is only tested, never kept."""
    lock = out / ".lock"
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return  # no lock file: nobody has written here
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 64).decode(errors="replace").strip() or "?"
        raise StoreError(
            f"{out} is being written by another specbench (pid {owner}, lock {lock}); "
            "wait for it or stop it first"
        ) from None
    finally:
        os.close(fd)
