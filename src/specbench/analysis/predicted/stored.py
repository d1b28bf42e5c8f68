"""The model shapes stored with a run (``architectures.json``), so the theory needs no model file.

Written when the run is made (run/prepare.py), beside ``env.json``: for the target model and each
arm's draft model, what the theory reads from the file itself::

    {"<path as the matrix or the arm's flags name it>": {
        "source": "GGUF header" | "config.json",
        "architecture": {<theory.arch.Architecture fields>},
        "bytes": <file size, or null>, "hf_dtype": <config.json torch_dtype as a quant name, or null>}}

A report rendered later (another day, another machine, the model file deleted or replaced) reads
the entry, not the file; a run made before this file existed falls back to reading the model.
Paths nothing could describe are left out: the theory then says "unknown", as it would have.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError, StoreError
from specbench.theory.arch import Architecture, architecture_from_mapping

ARCH_FILE = "architectures.json"


@dataclass(frozen=True)
class StoredModel:
    """One model as the run stored it: its shape, where that came from, its size and dtype."""

    arch: Architecture
    source: str
    bytes: int | None = None
    hf_dtype: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "architecture": asdict(self.arch),
            "bytes": self.bytes,
            "hf_dtype": self.hf_dtype,
        }


def _entry(value: str, raw: Any) -> StoredModel | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("architecture"), dict):
        return None
    fields = dict(raw["architecture"])
    name = str(fields.pop("name", value))
    try:
        arch = architecture_from_mapping(name, fields)
    except ConfigError:  # a field this version no longer knows: read the file as before
        return None
    size, dtype = raw.get("bytes"), raw.get("hf_dtype")
    return StoredModel(
        arch,
        str(raw.get("source", "stored")),
        size if isinstance(size, int) and size > 0 else None,
        dtype if isinstance(dtype, str) else None,
    )


def read_stored(run_dir: Path | None, value: str | None) -> StoredModel | None:
    """The entry ``run_dir`` stored for the model path ``value`` (as the matrix or the arm's flags
    name it), or None (no such file, no such entry: an older run). A damaged file is a StoreError
    naming it (exit 5), as a damaged ``env.json`` is."""
    if run_dir is None or not value:
        return None
    path = run_dir / ARCH_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{path}: damaged or unreadable ({type(exc).__name__}): {exc}") from exc
    return _entry(value, data.get(value)) if isinstance(data, dict) else None
