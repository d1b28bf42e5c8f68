"""An engine binary's ``--help`` text, read once per build and cached.

The text is kept, not the parsed table, so a better parser needs no new read. For a build in
specbench's cache (the pinned llama-server, the managed vLLM venv) it is kept beside the build;
for a user's own binary in ``<cache>/help/``. Each entry records the binary's size and mtime: a
rebuilt binary is read again. A failure is never an error, only no text (without a table
nothing is checked): a refusal (non-zero exit) is kept as such, a timeout or a missing binary
is tried again next time, and a read-only cache only means reading the text again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from specbench.store.paths import cache_dir

HELP_FILE = "specbench-help.json"


def cache_path(binary: Path, argv: Sequence[str]) -> Path:
    """Beside a build specbench made (the folder above its ``bin/``), else in the cache."""
    root = cache_dir()
    try:
        build = binary.resolve().parent.parent
        if build.is_relative_to(root.resolve()) and build != root.resolve():
            return build / (HELP_FILE if len(argv) <= 1 else f"specbench-help-{_digest(argv)}.json")
    except OSError:
        pass
    return root / "help" / f"{binary.name}-{_digest([str(binary.resolve()), *argv])}.json"


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def help_text(
    binary: Path, argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None
) -> str | None:
    """The text ``binary argv`` prints (with ``env`` added to the environment), from the cache
    when the binary is unchanged; None when it cannot be read."""
    try:
        stat = binary.stat()
    except OSError:
        return None
    env_key = tuple(sorted((env or {}).items()))
    return cached_help_text(str(binary), tuple(argv), stat.st_size, stat.st_mtime_ns, timeout, env_key)


@functools.lru_cache(maxsize=16)
def cached_help_text(
    binary: str,
    argv: tuple[str, ...],
    size: int,
    mtime: int,
    timeout: float,
    env: tuple[tuple[str, str], ...],
) -> str | None:
    path = cache_path(Path(binary), argv)
    stamp = {"binary": binary, "argv": list(argv), "size": size, "mtime_ns": mtime}
    cached = _read(path)
    if cached is not None and all(cached.get(k) == v for k, v in stamp.items()):
        text = cached.get("text")
        return text if isinstance(text, str) else None
    try:
        done = subprocess.run(
            [binary, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **dict(env)},
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None  # not kept: a timeout on a busy box may pass next time
    # A refusal is kept too (as null): this build answers the same every time, and vLLM's CLI
    # takes seconds to import torch before it refuses.
    text = done.stdout if done.returncode == 0 and done.stdout.strip() else None
    _write(path, {**stamp, "text": text, "returncode": done.returncode})
    return text


def _read(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)  # a parallel reader sees the old entry or the new, never half of one
    except OSError:  # a read-only cache: the text is read again next time, nothing worse
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
