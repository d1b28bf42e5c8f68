"""Append-only JSONL files that survive hard kills and full disks.

``records.jsonl`` and ``cells.jsonl`` are journals: every append is one ``write`` of one whole
line on an ``O_APPEND`` descriptor, so a reader never sees half a record from a live writer. What
can still tear a line is the machine (power loss) or a write the disk could only half take; so

* :func:`repair` runs before anything is appended to an existing file: a last line without its
  newline that is not valid JSON is cut off (and reported), so the next record starts on a fresh
  line instead of being glued to the fragment and lost with it;
* a failed write (``ENOSPC``, ``EDQUOT``, ``EROFS``, ``EIO``) truncates the file back to where the
  line started and raises a :class:`~specbench.errors.StoreError` (:mod:`specbench.store.safeio`,
  exit 5; :class:`~specbench.errors.DiskFullError` for a full disk): the directory stays resumable;
* ``fsync`` is batched (every :data:`FSYNC_EVERY` lines or :data:`FSYNC_SECONDS` seconds, and on
  close): a line is in the kernel once ``append`` returns, which is all a killed *process* needs;
  only a crashed *machine* can lose the last second, and then :func:`repair` cleans up.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specbench.store.safeio import append_bytes, guarded, store_error

FSYNC_EVERY = 64
FSYNC_SECONDS = 1.0


def repair(path: Path) -> str | None:
    """Cut a torn last line off ``path``; returns what was done (one line), or None if intact."""
    if not path.is_file():
        return None
    size = path.stat().st_size
    if size == 0:
        return None
    with guarded(path), path.open("rb+") as fh:  # a read-only disk: exit 5, not a traceback
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read()
        if tail.endswith(b"\n"):
            return None
        start = size - len(tail) + tail.rfind(b"\n") + 1  # 0 when the whole file is one line
        fragment = tail[tail.rfind(b"\n") + 1 :]
        if _is_json(fragment):
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")  # a complete record that only lacks its newline: keep it
            return None
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    return f"{path.name}: dropped a torn last line ({len(fragment)} bytes) left by an interrupted write"


def _is_json(fragment: bytes) -> bool:
    try:
        json.loads(fragment)
    except ValueError:
        return False
    return True


class Journal:
    """One JSONL file opened for appending whole lines."""

    def __init__(self, path: Path, scrub: Callable[[str], str] = str) -> None:
        self.path = path
        self.scrub = scrub  # secrets out (specbench.store.redact) before anything reaches the disk
        self._fd: int | None = None
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def append(self, obj: dict[str, Any]) -> None:
        line = (self.scrub(json.dumps(obj, default=str)) + "\n").encode()
        append_bytes(self._open(), line, self.path)  # whole, or the file is cut back
        self._unsynced += 1
        if self._unsynced >= FSYNC_EVERY or time.monotonic() - self._last_sync >= FSYNC_SECONDS:
            self.sync()

    def sync(self) -> None:
        if self._fd is None or not self._unsynced:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise store_error(self.path, exc) from exc
        self._unsynced, self._last_sync = 0, time.monotonic()

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            with guarded(self.path):
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd
