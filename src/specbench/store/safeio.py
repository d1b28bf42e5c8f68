"""The one way specbench writes into a run directory: whole or not at all, failures as exit 5.

A full disk used to surface as ``internal error (OSError: [Errno 28] ...)`` (exit 1), and a
buffered append could leave half a record in ``records.jsonl``. Every writer of the run
directory (records, cells, manifests, scrapes, the matrix copy, plans, engine-log scrubs) goes
through here instead:

* :func:`append_bytes` writes one whole piece to an ``O_APPEND`` file; on any failure (a short
  write the disk could only half take, ``ENOSPC``) the file is truncated back to where the piece
  started, so no torn line remains for the next record to be glued to;
* :func:`write_atomic` writes a temporary file and renames it over the target, so a crash or a
  full disk never leaves half a manifest; the temporary file is removed on failure;
* :func:`store_error` turns the ``OSError`` into a one-line
  :class:`~specbench.errors.StoreError` naming the file (exit 5): :class:`DiskFullError` for
  ``ENOSPC``/``EDQUOT``/``EFBIG``, a "read-only" line for ``EROFS``, "cannot write" otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from specbench.errors import DiskFullError, StoreError

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def store_error(path: Path, exc: OSError) -> StoreError:
    """The one line (exit 5) for a write to ``path`` that failed with ``exc``."""
    reason = exc.strerror or str(exc)
    if exc.errno in NO_SPACE:
        return DiskFullError(
            f"{path}: {reason}: the run stopped with every record so far intact; "
            "free space, then continue with --resume"
        )
    if exc.errno == errno.EROFS:
        return StoreError(
            f"{path}: {reason}: the run directory must be writable; continue with --resume there"
        )
    return StoreError(f"{path}: cannot write: {reason}; continue with --resume once it is fixed")


@contextlib.contextmanager
def guarded(path: Path) -> Iterator[None]:
    """Any ``OSError`` in the block (a ``mkdir``, an ``open``) becomes :func:`store_error`."""
    try:
        yield
    except OSError as exc:
        raise store_error(path, exc) from exc


def append_bytes(fd: int, data: bytes, path: Path) -> None:
    """Append ``data`` to ``fd`` (opened ``O_APPEND``) whole, or leave the file as it was."""
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        _write_all(fd, data)
    except OSError as exc:
        undo(fd, start)
        raise store_error(path, exc) from exc


def undo(fd: int, start: int) -> None:
    """Cut ``fd`` back to ``start``: a half line would eat the next record. If even that fails,
    :func:`specbench.store.journal.repair` cuts the fragment on the next ``--resume``."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, start)


def append_file(path: Path, data: bytes, sync: bool = True) -> None:
    """Append ``data`` to ``path`` whole (created if missing), ``fsync`` ed when ``sync``; on a
    failed ``fsync`` the piece is cut again (the disk may not hold it)."""
    with guarded(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        append_bytes(fd, data, path)
        if sync:
            try:
                os.fsync(fd)
            except OSError as exc:
                undo(fd, start)
                raise store_error(path, exc) from exc
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8): never half written, even on a full disk.
    The error names ``path``, the file the user knows, not its temporary twin."""
    raw = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, raw)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise store_error(path, exc) from exc


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # no progress: the disk takes nothing more
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]
