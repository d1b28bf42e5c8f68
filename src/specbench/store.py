"""The run directory: everything measured, raw and versioned, so reports recompute from it.

Layout::

    manifest.json    resolved matrix, versions, schema_version, host, start/end, arm status
    env.json         hardware, OS, Python, GPU, engine version/commit, model SHA-256
    records.jsonl    one JSON object per request, appended + flushed + fsynced as it completes
    cells.jsonl      one object per served cell: server description, /metrics deltas, exit code
    metrics/         raw /metrics scrapes before and after each cell
    logs/<arm>.log   the engine's stdout+stderr
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from specbench import SCHEMA_VERSION, __version__
from specbench.errors import StoreError
from specbench.paths import cache_dir

RecordKey = tuple[str, str, int]  # (arm, prompt_id, repeat)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, obj: Any) -> None:
    """Atomic: a crash never leaves a half-written manifest."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


class RunStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.records_path = root / "records.jsonl"
        self.cells_path = root / "cells.jsonl"
        self.manifest_path = root / "manifest.json"

    # -- creation ---------------------------------------------------------------------------
    def create(self, manifest: dict[str, Any], resume: bool) -> None:
        if self.manifest_path.exists() and not resume:
            raise StoreError(
                f"{self.root} already holds a run: pass --resume to continue it, or another --out"
            )
        if resume and self.manifest_path.exists():
            self._check_same_matrix(manifest)
            self.update_manifest(resumed_at=now_iso(), finished_at=None)
            return
        for sub in ("metrics", "logs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        base = {
            "schema_version": SCHEMA_VERSION,
            "specbench_version": __version__,
            "host": platform.node(),
            "started_at": now_iso(),
            "finished_at": None,
            "arms": {},
        }
        _write_json(self.manifest_path, {**base, **manifest})

    def _check_same_matrix(self, manifest: dict[str, Any]) -> None:
        old = self.manifest().get("matrix")
        if old is not None and json.loads(json.dumps(old, default=str)) != json.loads(
            json.dumps(manifest.get("matrix"), default=str)
        ):
            raise StoreError(
                f"{self.root}: --resume with a different matrix than the one this run started with"
            )

    # -- manifest ---------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.is_file():
            raise StoreError(f"{self.root}: not a run directory (no manifest.json)")
        data: dict[str, Any] = json.loads(self.manifest_path.read_text())
        if data.get("schema_version", 0) > SCHEMA_VERSION:
            raise StoreError(f"{self.root}: written by a newer specbench (schema {data['schema_version']})")
        return data

    def update_manifest(self, **fields: Any) -> None:
        _write_json(self.manifest_path, {**self.manifest(), **fields})

    def set_arm_status(self, arm: str, **fields: Any) -> None:
        data = self.manifest()
        data.setdefault("arms", {}).setdefault(arm, {}).update(fields)
        _write_json(self.manifest_path, data)

    # -- records ----------------------------------------------------------------------------
    def append(self, path: Path, obj: dict[str, Any]) -> None:
        with path.open("a") as fh:
            fh.write(json.dumps(obj, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append_record(self, record: dict[str, Any]) -> None:
        self.append(self.records_path, {"schema_version": SCHEMA_VERSION, **record})

    def append_records(self, records: list[dict[str, Any]]) -> None:
        """Several records with one fsync (the batch a :class:`RecordWriter` thread drained)."""
        with self.records_path.open("a") as fh:
            lines = (json.dumps({"schema_version": SCHEMA_VERSION, **r}, default=str) for r in records)
            fh.write("".join(line + "\n" for line in lines))
            fh.flush()
            os.fsync(fh.fileno())

    def append_cell(self, cell: dict[str, Any]) -> None:
        self.append(self.cells_path, {"schema_version": SCHEMA_VERSION, **cell})

    def records(self) -> list[dict[str, Any]]:
        return list(_read_jsonl(self.records_path))

    def cells(self) -> list[dict[str, Any]]:
        return list(_read_jsonl(self.cells_path))

    def completed(self) -> set[RecordKey]:
        """Keys with a successful measured record: what --resume skips."""
        return {
            (r["arm"], r["prompt_id"], r["repeat"])
            for r in self.records()
            if not r.get("warmup") and r.get("error") is None
        }

    # -- files ------------------------------------------------------------------------------
    def log_path(self, arm: str) -> Path:
        return self.root / "logs" / f"{arm}.log"

    def save_scrape(self, arm: str, repeat: int, when: str, text: str) -> str:
        name = f"metrics/{arm}-r{repeat}-{when}.prom"
        (self.root / name).write_text(text)
        return name

    def fitted_prompts(self) -> dict[str, Any]:
        path = self.root / "fitted_prompts.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        return data

    def save_fitted_prompts(self, fitted: dict[str, Any]) -> None:
        _write_json(self.root / "fitted_prompts.json", fitted)

    def write_env(self, env: dict[str, Any]) -> None:
        _write_json(self.root / "env.json", env)

    def env(self) -> dict[str, Any]:
        path = self.root / "env.json"
        return json.loads(path.read_text()) if path.is_file() else {}


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    with path.open() as fh:
        for line in fh:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a hard kill; everything before it is intact


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
        "gpus": _nvidia_smi(),
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
        _write_json(cache_path, cache)
    return str(cache[key])
