"""Where specbench keeps things that outlive a run: engine builds and lab models."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SPECBENCH_CACHE``, else ``$XDG_CACHE_HOME/specbench``, else ``~/.cache/specbench``.

    Kept outside the repository so CI builds llama-server once per machine.
    """
    explicit = os.environ.get("SPECBENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specbench"


# Linux's limits (PATH_MAX, NAME_MAX): a longer path fails inside open() with ENAMETOOLONG, far
# from the field that named it; checked where a path enters instead.
MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot name a file on this system (None: it can). Says nothing about whether
    the file exists: a NUL byte, or a path or one of its parts too long for the kernel."""
    if "\x00" in text:
        return "holds a NUL byte"
    raw = os.fsencode(text)
    if len(raw) > MAX_PATH_BYTES:
        return f"is {len(raw)} bytes long (at most {MAX_PATH_BYTES})"
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > MAX_NAME_BYTES:
        return f"has a part of {longest} bytes (at most {MAX_NAME_BYTES} per file or folder name)"
    return None
