"""What ran is what is shown: the model files a launch serves are the ones the run describes.

Reported (issue 44): a run on a truncated GGUF failed; the good file was then put at the same path
and ``--resume --retry-failed`` finished with exit 0 and no word, while ``env.json``,
``BENCHMARK_ENV.md`` and ``architectures.json`` kept the truncated file's SHA-256 and size (the
theory read the target as "0.59 bits/weight"). So every launch re-checks the files it serves — the
target and the arm's draft model (the engine names it: :meth:`Engine.draft_model`) — against
env.json's record, and ``run --resume`` (``--dry-run`` too) does before anything is launched. Size
and mtime first; the SHA-256 only when one of them moved, so an unchanged file costs a ``stat``.
Each launch's files go into its cell (``cells.jsonl`` ``model_files``).

A file whose content is not the recorded one:

* if a launch of the run already served the recorded content (a cell names it, or a cell from
  before ``model_files`` existed served that path), going on would compare two models in one run:
  :class:`~specbench.errors.ModelChangedError` (exit 5) names the file and both contents; put the
  measured file back and ``--resume``, or start a new ``--out``;
* else nothing was measured with the old content (every launch of it failed, as on the truncated
  file): ``env.json`` and ``architectures.json`` are rewritten to describe the file served, the
  change is kept in the manifest (``model_changes``, for the report) and said on the console.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.predicted.stored import ARCH_FILE
from specbench.engines import ENGINES
from specbench.engines.base import Engine
from specbench.errors import ModelChangedError
from specbench.matrix.config import Matrix
from specbench.run.modelfiles import file_flag_values
from specbench.store.redact import SECRET_FILE_FLAGS
from specbench.store.rundir import RunStore, file_sha256, now_iso

SHA_SHOWN = 12  # hex digits of a SHA-256 in a message: enough to tell two files apart


# -- what env.json records ------------------------------------------------------------------
def file_record(path: str) -> dict[str, object]:
    """env.json's entry for a model file; ``mtime_ns`` lets a launch skip the hash when the file
    has not been touched since."""
    info = os.stat(path)
    return {
        "path": path,
        "sha256": file_sha256(Path(path)),
        "bytes": info.st_size,
        "mtime_ns": info.st_mtime_ns,
    }


def arm_files(matrix: Matrix) -> dict[str, list[dict[str, object]]]:
    """Every file an arm's flags name (draft model, chat template, ...), hashed: a changed draft or
    template changes the measurement as surely as a changed target does."""
    target = file_sha256(Path(matrix.model)) if os.path.isfile(matrix.model) else None
    out: dict[str, list[dict[str, object]]] = {}
    # The engine's file flags less the secret ones: a key file's hash has no place in a manifest.
    flags = ENGINES[matrix.engine].file_flags - SECRET_FILE_FLAGS
    for arm in matrix.arms:
        args = matrix.arm_args(arm)
        # Both spellings, ``-md PATH`` and ``--spec-draft-model=PATH``: a file recorded in neither
        # would be served unchecked (servedfiles: every launch compares with these records).
        records = [
            {"flag": flag, **file_record(value)}
            for flag, value in file_flag_values(args, flags)
            if os.path.isfile(value)
        ]
        # A draft with the target's hash is self-draft: acceptance near 1 says nothing about a
        # real draft, and any rejection is the engine's numerics, not the draft's quality.
        out[arm] = [r | {"same_as_target": r["sha256"] == target} for r in records]
    return out


def architectures_of(matrix: Matrix, engine: Engine) -> dict[str, object]:
    """The target's and each arm's draft model's shape, read from their files now."""
    # Here, not at the top: the theory behind it loads SciPy, which the runner must not import.
    from specbench.analysis.predicted.models import run_architectures

    return run_architectures(matrix.model, [matrix.arm_args(arm) for arm in matrix.arms], engine)


def recorded_files(env: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """path → env.json's record of it (the target's, then each arm's files)."""
    found: dict[str, dict[str, Any]] = {}
    model = env.get("model")
    if isinstance(model, dict) and isinstance(model.get("sha256"), str):
        found[str(model.get("path"))] = dict(model)
    arms = env.get("arm_files")
    for files in arms.values() if isinstance(arms, dict) else ():
        for rec in files if isinstance(files, list) else ():
            if isinstance(rec, dict) and isinstance(rec.get("sha256"), str):
                found.setdefault(str(rec.get("path")), dict(rec))
    return found


# -- what a launch serves -------------------------------------------------------------------
def served_paths(matrix: Matrix, engine: Engine, args: Sequence[str]) -> list[tuple[str, str]]:
    """(role, path) of the model files a launch with ``args`` loads: the target, and the draft
    model the engine reads from the arm's flags."""
    draft = engine.draft_model(list(args))
    return [("model", matrix.model), *([("draft model", draft)] if draft else [])]


@dataclass(frozen=True)
class FileState:
    path: str
    bytes: int
    mtime_ns: int
    sha256: str

    def record(self) -> dict[str, object]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes, "mtime_ns": self.mtime_ns}


def state_now(path: str, known: Mapping[str, Any] | None) -> FileState | None:
    """The file at ``path`` now (None: not a regular file; the engine says what it lacks). The
    hash is ``known``'s when size and mtime are the recorded ones: a launch of an untouched file
    reads no byte of it."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    size, mtime = info.st_size, info.st_mtime_ns
    if known and known.get("bytes") == size and known.get("mtime_ns") == mtime:
        return FileState(path, size, mtime, str(known["sha256"]))
    return FileState(path, size, mtime, file_sha256(Path(path)))


def content_text(sha256: object, size: object) -> str:
    """``sha256 3fa2c1d0e4b5…, 1,055,232 bytes``."""
    sized = f"{size:,} bytes" if isinstance(size, int) else "size unknown"
    return f"sha256 {str(sha256)[:SHA_SHOWN]}…, {sized}"


@dataclass(frozen=True)
class Change:
    """A served file whose content is not the one env.json records."""

    role: str  # "model", "draft model"
    old: dict[str, Any]  # env.json's record
    new: FileState
    measured: int  # launches of this run that served the old content

    def what(self) -> str:
        old = content_text(self.old.get("sha256"), self.old.get("bytes"))
        new = content_text(self.new.sha256, self.new.bytes)
        return f"{self.role} {self.new.path} changed since this run recorded it ({old}; now {new})"

    def refusal(self) -> str:
        launches = f"{self.measured} launch{'es' if self.measured != 1 else ''}"
        return (
            f"{self.what()}, and {launches} of this run measured the old file: going on would compare "
            "two models in one run; put the measured file back and --resume, or start a new --out"
        )

    def note(self) -> str:
        return (
            f"{self.what()}; no launch served the old file, so env.json and architectures.json now "
            "describe the new one"
        )

    def entry(self) -> dict[str, Any]:
        """The manifest's ``model_changes`` entry: what the report shows as a finding."""
        old = {k: self.old.get(k) for k in ("sha256", "bytes")}
        return {
            "role": self.role,
            "path": self.new.path,
            "old": old,
            "new": self.new.record(),
            "at": now_iso(),
        }


def launches_with_other(
    cells: Sequence[Mapping[str, Any]], path: str, sha256: str, matrix: Matrix, engine: Engine
) -> int:
    """Launches (cells) that served ``path`` with content other than ``sha256``. A cell written
    before cells named their files is taken to have served the recorded file wherever its arm
    loads ``path``: what it measured cannot be shown to be the new content."""
    count = 0
    for cell in cells:
        if cell.get("lost"):
            continue
        files = cell.get("model_files")
        if isinstance(files, list):
            count += any(
                isinstance(f, dict) and f.get("path") == path and f.get("sha256") != sha256 for f in files
            )
        elif cell.get("arm") in matrix.arms:
            count += path in {p for _, p in served_paths(matrix, engine, matrix.arm_args(str(cell["arm"])))}
    return count


# -- the check ------------------------------------------------------------------------------
class ServedFiles:
    """The run's record of its model files, held while it runs; :meth:`changes` before each launch."""

    def __init__(self, matrix: Matrix, engine: Engine, store: RunStore) -> None:
        self.matrix, self.engine, self.store = matrix, engine, store
        self.known = recorded_files(store.env())

    def changes(self, args: Sequence[str]) -> tuple[list[dict[str, object]], list[Change]]:
        """The files a launch with ``args`` serves (for its cell) and those that changed; raises
        :class:`ModelChangedError` for one whose old content was measured."""
        served, changed = [], []
        for role, path in served_paths(self.matrix, self.engine, args):
            known = self.known.get(path)
            now = state_now(path, known)
            if now is None:
                continue
            served.append({"role": role, **now.record()})
            if known is None:  # not there when env.json was written: what the cells say, or now
                known = self.known[path] = self._last_served(path) or now.record()
            if known.get("sha256") == now.sha256:
                known.update(now.record())  # a touched, unchanged file is not hashed again
                continue
            measured = launches_with_other(self.store.cells(), path, now.sha256, self.matrix, self.engine)
            change = Change(role, known, now, measured)
            if measured:
                raise ModelChangedError(change.refusal())
            changed.append(change)
        return served, changed

    def _last_served(self, path: str) -> dict[str, Any] | None:
        """The content the last cell that named ``path`` served (read only for a file env.json
        does not record: one that was missing when the run began)."""
        found = None
        for cell in self.store.cells():
            files = cell.get("model_files")
            for rec in files if isinstance(files, list) else ():
                if isinstance(rec, dict) and rec.get("path") == path and isinstance(rec.get("sha256"), str):
                    found = dict(rec)
        return found

    def every_arm(self) -> list[Change]:
        """:meth:`changes` over every arm's launch, each file once (``run --resume``)."""
        found: dict[str, Change] = {}
        for arm in self.matrix.arms:
            for change in self.changes(self.matrix.arm_args(arm))[1]:
                found.setdefault(change.new.path, change)
        return list(found.values())

    def adopt(self, changes: Sequence[Change]) -> None:
        """Make the run's description the files served: env.json's records, architectures.json,
        and the manifest's ``model_changes`` (the report's evidence that the file changed)."""
        if not changes:
            return
        env = self.store.env()
        if os.path.isfile(self.matrix.model):
            env["model"] = file_record(self.matrix.model)
        env["arm_files"] = arm_files(self.matrix)
        self.store.write_env(env)
        shapes = architectures_of(self.matrix, self.engine)
        self.store.write_text(ARCH_FILE, json.dumps(shapes, indent=1))
        earlier = self.store.manifest().get("model_changes") or []
        self.store.update_manifest(model_changes=[*earlier, *(c.entry() for c in changes)])
        self.known = recorded_files(env)
