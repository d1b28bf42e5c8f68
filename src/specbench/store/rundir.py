"""The run directory: everything measured, raw and versioned, so reports recompute from it.

Layout::

    manifest.json    resolved matrix, versions, schema_version, host, start/end, arm status
    env.json         hardware, OS, Python, GPU, engine version/commit, model SHA-256
    engine_args.json the engine's argument table the flags were checked against (CONFOUND reads it)
    architectures.json the models' shapes from their GGUF headers / config.json (the theory reads it)
    records.jsonl    one JSON object per request, appended as one whole line as it completes
    cells.jsonl      one object per served cell: server description, /metrics deltas, exit code
    metrics/         raw /metrics scrapes before and after each cell
    logs/<arm>.log   the engine's stdout+stderr
    .lock            held (flock) by the one process writing the directory; holds its pid

The JSONL files are journals (:mod:`specbench.store.journal`): a torn last line is cut on resume and
reported, a full disk stops the run with every whole record kept. Every file is written through
:mod:`specbench.store.safeio` (whole or not at all; a full or read-only disk is exit 5) and
:meth:`Redactor.scrub` (no secret reaches the disk).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
from pydantic_core import from_json

from specbench import __version__
from specbench.errors import StoreError
from specbench.store.journal import Journal, repair
from specbench.store.paths import cache_dir
from specbench.store.record import Record
from specbench.store.redact import Redactor
from specbench.store.safeio import append_file, guarded, write_atomic
from specbench.store.schema import SCHEMA_VERSION, CellInfo, Manifest, RequestRecord, record_line, stamped
from specbench.store.settled import settled

RecordKey = tuple[str, str, int]  # (arm, prompt_id, repeat)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, obj: Any, scrub: Callable[[str], str] = str) -> None:
    """Atomic: a crash never leaves a half-written manifest. ``scrub`` removes secrets."""
    write_atomic(path, scrub(json.dumps(obj, indent=1, default=str)))


def _read_json(path: Path) -> Any:
    """A JSON file of the run directory; a damaged one is a one-line StoreError naming it."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{path}: damaged or unreadable ({type(exc).__name__}): {exc}") from exc


#: Matrix fields an attached run adds to on --resume: its arms, and the baseline once attached.
_GROWING = ("arms", "baseline")


class RunStore:
    batches = True  # records may be appended in batches from a writer thread (store/sink.py: RecordSink)

    def __init__(self, root: Path, redactor: Redactor | None = None) -> None:
        self.root = root
        self.redactor = redactor or Redactor()  # every file written goes through its scrub
        self.records_path = root / "records.jsonl"
        self.cells_path = root / "cells.jsonl"
        self.manifest_path = root / "manifest.json"
        self.lock_path = root / ".lock"
        self.repairs: list[str] = []  # what opening for writing had to fix, one line each
        self.skipped: dict[str, int] = {}  # unreadable lines per file seen by readers
        self._journals: dict[Path, Journal] = {}
        self._lock_fd: int | None = None

    # -- creation ---------------------------------------------------------------------------
    def create(self, manifest: dict[str, Any], resume: bool) -> None:
        if self.manifest_path.exists() and not resume:
            raise StoreError(
                f"{self.root} already holds a run: pass --resume to continue it, or another --out"
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"--out {self.root}: cannot be a run directory: {exc.strerror or exc}") from exc
        self.lock()
        if resume and self.manifest_path.exists():
            self._check_same_matrix(manifest)
            if manifest.get("attach"):  # another attached server joins the comparison as an arm
                self.update_manifest(matrix=manifest["matrix"], attach=manifest["attach"])
            self.repairs = [r for p in (self.records_path, self.cells_path) if (r := repair(p))]
            fixed = {"repairs": [*self.manifest().get("repairs", []), *self.repairs]} if self.repairs else {}
            self.update_manifest(resumed_at=now_iso(), finished_at=None, **fixed)
            return
        for sub in ("metrics", "logs"):
            with guarded(self.root / sub):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        base: Manifest = {
            "schema_version": SCHEMA_VERSION,
            "specbench_version": __version__,
            "host": platform.node(),
            "started_at": now_iso(),
            "finished_at": None,
            "arms": {},
        }
        write_json(self.manifest_path, {**base, **manifest}, self.redactor.scrub)

    def lock(self) -> None:
        """Hold the directory's lock until :meth:`close` (or process death: flock is released by
        the kernel, so a killed run never leaves a stale lock behind)."""
        if self._lock_fd is not None:
            return
        with guarded(self.lock_path):  # a read-only disk: exit 5, not a traceback
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"{self.root} is being written by another specbench (pid {owner}, lock {self.lock_path}); "
                "wait for it or stop it first"
            ) from None
        self._lock_fd = fd
        with guarded(self.lock_path):  # the pid is a courtesy for the next writer's message
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())

    def close(self) -> None:
        """fsync and close the journals, release the lock."""
        try:
            for journal in self._journals.values():
                journal.close()
        finally:
            self._journals.clear()
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    def __del__(self) -> None:
        # A store dropped without close() (an importer, a test) must not keep its lock.
        with contextlib.suppress(Exception):
            self.close()

    def sync(self) -> None:
        """Force buffered journal lines to disk (end of a cell)."""
        for journal in self._journals.values():
            journal.sync()

    def _check_same_matrix(self, manifest: dict[str, Any]) -> None:
        old = self.manifest().get("matrix")
        new = json.loads(self.redactor.scrub(json.dumps(manifest.get("matrix"), default=str)))
        old = json.loads(json.dumps(old, default=str))
        if manifest.get("attach") and isinstance(old, dict) and isinstance(new, dict):
            # Attached servers are measured one per call: each adds its arm (api.attach_matrix).
            old, new = ({k: v for k, v in m.items() if k not in _GROWING} for m in (old, new))
        if old is not None and old != new:
            raise StoreError(
                f"{self.root}: --resume with a different matrix than the one this run started with"
            )

    # -- manifest ---------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.is_file():
            raise StoreError(f"{self.root}: not a run directory (no manifest.json)")
        data = _read_json(self.manifest_path)
        if not isinstance(data, dict):
            raise StoreError(f"{self.manifest_path}: damaged (not a JSON object)")
        version = data.get("schema_version", 0)
        if not isinstance(version, int):
            raise StoreError(f"{self.manifest_path}: damaged (schema_version {version!r})")
        for key, kind in (("matrix", dict), ("arms", dict)):
            if key in data and data[key] is not None and not isinstance(data[key], kind):
                raise StoreError(f"{self.manifest_path}: damaged ({key!r} is not an object)")
        arms = (data.get("matrix") or {}).get("arms")
        if arms is not None and not isinstance(arms, dict):
            raise StoreError(f"{self.manifest_path}: damaged ('matrix.arms' is not an object)")
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.root}: written by a newer specbench (schema {data['schema_version']})")
        return data

    def update_manifest(self, **fields: Any) -> None:
        write_json(self.manifest_path, {**self.manifest(), **fields}, self.redactor.scrub)

    def set_arm_status(self, arm: str, **fields: Any) -> None:
        data = self.manifest()
        data.setdefault("arms", {}).setdefault(arm, {}).update(fields)
        write_json(self.manifest_path, data, self.redactor.scrub)

    def retry_failed(self) -> list[str]:
        """Make failed arms runnable again (``--resume --retry-failed``); their errors are kept
        in ``previous_errors``. Returns the arms."""
        data = self.manifest()
        arms = [a for a, info in data.get("arms", {}).items() if info.get("status") == "failed"]
        for arm in arms:
            info = data["arms"][arm]
            info["previous_errors"] = [*info.get("previous_errors", []), info.pop("error", None)]
            info["status"] = "retrying"
        write_json(self.manifest_path, data, self.redactor.scrub)
        return arms

    # -- records ----------------------------------------------------------------------------
    def append(self, path: Path, obj: dict[str, Any]) -> None:
        if path not in self._journals:
            self._journals[path] = Journal(path, self.redactor.scrub)
        self._journals[path].append(obj)

    def append_record(self, record: RequestRecord) -> None:
        """The one writer of ``records.jsonl`` lines (batched: :meth:`append_records`)."""
        self.append(self.records_path, stamped(record))

    def append_records(self, records: list[RequestRecord]) -> None:
        """Several records with one fsync (an import, a merge): the lines :meth:`append_record`
        writes."""
        self.append_lines([record_line(r) for r in records])

    def append_lines(self, lines: list[str]) -> None:
        """Records already serialized by :func:`schema.record_line` (a :class:`RecordWriter`
        serializes them on the loop, its thread writes them), scrubbed, in one write and one
        fsync: all of them or, on a full disk, none (the file is cut back; DiskFullError, exit 5)."""
        append_file(self.records_path, self.redactor.scrub("".join(lines)).encode())

    def append_cell(self, cell: CellInfo) -> None:
        self.append(self.cells_path, stamped(cell))

    # Two readers: the lines as plain dicts, exactly as written (lines of any schema version,
    # edited or imported: what a merge or a resume copies on), and the same lines read once as
    # :class:`Record` (what every other reader takes). Writers take the typed shapes.
    def records(self) -> list[dict[str, Any]]:
        return self._read(self.records_path, _RECORD_KEYS)

    def typed_records(self, read: Callable[[dict[str, Any]], Record] = Record.read) -> Iterator[Record]:
        """:meth:`iter_records` read as records. ``read``: how a line becomes one; the default
        knows no engine, so its server counts are empty (:func:`specbench.engines.read_record`
        reads them; the analysis packs a line's chunks before)."""
        return map(read, self.iter_records())

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """The records one at a time, as :meth:`records` reads them (``skipped`` is set once the
        file has been read through): a reader that keeps less than the whole line need not hold
        every line at once (issue 31)."""
        bad = [0]
        yield from _iter_jsonl(self.records_path, _RECORD_KEYS, bad)
        if bad[0]:
            self.skipped[self.records_path.name] = bad[0]

    def cells(self) -> list[dict[str, Any]]:
        return self._read(self.cells_path, _CELL_KEYS)

    def _read(self, path: Path, keys: dict[str, type | tuple[type, ...]]) -> list[dict[str, Any]]:
        rows, bad = _read_jsonl(path, keys)
        if bad:
            self.skipped[path.name] = bad
        return rows

    def completed(self) -> set[RecordKey]:
        """Keys with a settled measured record (a success, or a request refused as malformed:
        specbench.store.settled): what --resume skips."""
        done = [r for r in self.records() if not r.get("warmup") and settled(r)]
        return {(r["arm"], r["prompt_id"], r["repeat"]) for r in done}

    # -- files ------------------------------------------------------------------------------
    def log_path(self, arm: str) -> Path:
        return self.root / "logs" / f"{arm}.log"

    def save_scrape(self, arm: str, repeat: int, when: str, text: str) -> str:
        name = f"metrics/{arm}-r{repeat}-{when}.prom"
        self.write_text(name, text)
        return name

    def write_text(self, name: str, text: str) -> None:
        """``name`` (relative to the run directory; its folder is made) replaced by ``text``,
        scrubbed, atomically: the matrix copy, scrapes, files relayed from other machines."""
        path = self.root / name
        with guarded(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.redactor.scrub(text))

    def append_log(self, arm: str, text: str) -> None:
        """Append ``text`` (scrubbed) to the arm's engine log: a log relayed from another machine."""
        path = self.log_path(arm)
        with guarded(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        append_file(path, self.redactor.scrub(text).encode("utf-8", errors="surrogateescape"), sync=False)

    def fitted_prompts(self) -> dict[str, Any]:
        path = self.root / "fitted_prompts.json"
        data = _read_json(path) if path.is_file() else {}
        if not isinstance(data, dict):
            raise StoreError(f"{path}: damaged (not a JSON object); delete it to fit prompts again")
        return data

    def save_fitted_prompts(self, fitted: dict[str, Any]) -> None:
        write_json(self.root / "fitted_prompts.json", fitted, self.redactor.scrub)

    def write_env(self, env: dict[str, Any]) -> None:
        write_json(self.root / "env.json", env, self.redactor.scrub)

    def env(self) -> dict[str, Any]:
        path = self.root / "env.json"
        data = _read_json(path) if path.is_file() else {}
        return data if isinstance(data, dict) else {}


# What a line must hold to be a record or a cell; anything else is counted and skipped.
_RECORD_KEYS: dict[str, type | tuple[type, ...]] = {"arm": str, "prompt_id": (str, int), "repeat": int}
_CELL_KEYS: dict[str, type | tuple[type, ...]] = {"arm": str, "repeat": int}


def _read_jsonl(path: Path, keys: dict[str, type | tuple[type, ...]]) -> tuple[list[dict[str, Any]], int]:
    """Rows that are JSON objects holding ``keys`` (of those types), and how many lines were not
    (torn, edited by hand)."""
    bad = [0]
    rows = list(_iter_jsonl(path, keys, bad))
    return rows, bad[0]


def _iter_jsonl(
    path: Path, keys: dict[str, type | tuple[type, ...]], bad: list[int]
) -> Iterator[dict[str, Any]]:
    """:func:`_read_jsonl`'s rows one at a time, counting the unreadable lines in ``bad[0]``."""
    if not path.is_file():
        return
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            row = _row(raw)
            if row is None or any(not isinstance(row.get(k), t) for k, t in keys.items()):
                bad[0] += 1
                continue
            yield row


def _row(raw: bytes) -> dict[str, Any] | None:
    # pydantic's Rust parser (already a dependency) reads a record ~15 % faster than json.loads,
    # the same values to the bit (issue 31); a line it refuses (a lone surrogate escape, say) is
    # read as json.loads reads it, so what counts as unreadable is unchanged.
    try:
        row = from_json(raw)
    except ValueError:
        try:
            row = json.loads(raw)
        except ValueError:
            return None
    return row if isinstance(row, dict) else None


# -- environment ----------------------------------------------------------------------------
def environment() -> dict[str, Any]:
    """The machine, as pyperf records it next to results."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_count_logical": psutil.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "ram_bytes": psutil.virtual_memory().total,
        **_gpus(),
        "specbench_version": __version__,
        "captured_at": now_iso(),
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpus() -> dict[str, Any]:
    """``{"gpus": [...]}``, or nothing when nvidia-smi hangs or breaks: the report then says
    "unknown" (never "none detected", which would claim a CPU-only machine)."""
    try:
        return {"gpus": _nvidia_smi()}
    except (OSError, subprocess.SubprocessError):
        return {}


def _nvidia_smi() -> list[dict[str, str]]:
    if shutil.which("nvidia-smi") is None:
        return []
    query = "name,driver_version,memory.total"
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    rows = [ln.split(", ") for ln in done.stdout.strip().splitlines() if ln]
    cuda = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30, check=False).stdout
    version = cuda.split("CUDA Version:")[1].split()[0] if "CUDA Version:" in cuda else ""
    return [dict(zip(query.split(","), row, strict=False)) | {"cuda": version} for row in rows]


def file_sha256(path: Path) -> str:
    """SHA-256 of a model file, cached by (path, size, mtime): models are hundreds of MB."""
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    cache_path = cache_dir() / "sha256.json"
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    if key not in cache:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        cache[key] = digest.hexdigest()
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(cache_path, cache)
    return str(cache[key])
