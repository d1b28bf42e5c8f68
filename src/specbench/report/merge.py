"""Pool run directories from several machines (comparing two runs: report/compare.py).

Merging keeps every record raw and adds where it came from: ``machine`` (the source's host
plus its index, unique even when two sources share a host name) and ``source_repeat``;
``repeat`` is renumbered so pairs never cross machines (a paired speedup then compares an arm
with the baseline measured on the same box). Pooling numbers from different model files or
engine commits would average different things, so it is refused unless forced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from specbench.engines.argstore import ARGS_FILE
from specbench.errors import StoreError
from specbench.store.rundir import RunStore, now_iso
from specbench.store.schema import CellInfo, RequestRecord


def _source(path: Path, index: int) -> dict[str, Any]:
    store = RunStore(path)
    manifest = store.manifest()
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", str(manifest.get("host") or "host"))
    return {
        "path": path,
        "machine": f"{host}-{index}",
        "manifest": manifest,
        "env": store.env(),
        "store": store,
    }


def _identity(env: dict[str, Any]) -> dict[str, Any]:
    return {
        "model SHA-256": (env.get("model") or {}).get("sha256"),
        "engine commit": (env.get("engine") or {}).get("commit"),
    }


def check_poolable(sources: list[dict[str, Any]]) -> list[str]:
    """One line per difference from the first source in model SHA-256 or engine commit,
    naming both values and both runs (empty: the sources may be pooled)."""
    first = sources[0]
    problems = []
    for other in sources[1:]:
        for key, value in _identity(first["env"]).items():
            theirs = _identity(other["env"])[key]
            if value != theirs:
                problems.append(f"{key} differs: {value} ({first['path']}) vs {theirs} ({other['path']})")
    return problems


def _merged_matrix(sources: list[dict[str, Any]]) -> dict[str, Any]:
    matrix = dict(sources[0]["manifest"].get("matrix") or {})
    arms = dict(matrix.get("arms") or {})
    for s in sources[1:]:
        for arm, args in ((s["manifest"].get("matrix") or {}).get("arms") or {}).items():
            arms.setdefault(arm, args)
    return {**matrix, "arms": arms}


def _merged_arms(sources: list[dict[str, Any]]) -> dict[str, Any]:
    """Arm status: "ok" only if ok on every machine; the command of the first machine that ran it."""
    out: dict[str, Any] = {}
    for s in sources:
        for arm, info in (s["manifest"].get("arms") or {}).items():
            entry = out.setdefault(arm, {"status": info.get("status"), "command": info.get("command")})
            if info.get("status") != "ok":
                entry["status"] = info.get("status")
            entry.setdefault("machines", []).append(s["machine"])
    return out


def _copy_rows(s: dict[str, Any], out: RunStore, offset: int, seq: int) -> int:
    """Append the source's records and cells, tagged; returns the last seq used."""
    for rec in s["store"].records():
        seq += 1
        # Through the one writer; each line keeps its own schema_version (schema.stamped).
        out.append_record(cast(RequestRecord, rec | _tags(s, rec, offset) | {"seq": seq}))
    for cell in s["store"].cells():
        out.append_cell(cast(CellInfo, cell | _tags(s, cell, offset)))
    return seq


def _tags(s: dict[str, Any], row: dict[str, Any], offset: int) -> dict[str, Any]:
    repeat = row.get("repeat")
    shifted = offset + repeat if isinstance(repeat, int) else repeat
    return {"machine": s["machine"], "source_repeat": repeat, "repeat": shifted}


def merge_runs(runs: Sequence[Path], out: Path, force: bool = False) -> Path:
    """Combine run directories into ``out`` (a new run directory) and return it.

    Each source's env goes to ``out/envs/<machine>.json``; the manifest lists the sources.
    Raises StoreError when the sources used different model files or engine commits (unless
    ``force``), when fewer than two runs are given, or when ``out`` already holds a run."""
    if len(runs) < 2:
        raise StoreError(f"merge needs at least two run directories, got {len(runs)}")
    sources = [_source(Path(p), i) for i, p in enumerate(runs)]
    problems = check_poolable(sources)
    if problems and not force:
        raise StoreError(f"refusing to pool runs: {problems[0]}; pass --force to merge anyway")
    store = RunStore(out)
    store.create(_manifest(sources, problems), resume=False)
    (out / "envs").mkdir(exist_ok=True)
    seq, stride = 0, 1 + max(_max_repeat(s) for s in sources)
    for i, s in enumerate(sources):
        (out / "envs" / f"{s['machine']}.json").write_text(json.dumps(s["env"], indent=1))
        seq = _copy_rows(s, store, i * stride, seq)
    store.write_env({**sources[0]["env"], "merged_from": [s["machine"] for s in sources]})
    _copy_arg_table(sources[0]["store"].root, store)
    store.update_manifest(finished_at=now_iso())
    return out


def _copy_arg_table(source: Path, store: RunStore) -> None:
    """The argument table the first source's flags were checked against (merge requires the same
    engine build, so it serves every source): CONFOUND then reads the merged run as it read them."""
    table = source / ARGS_FILE
    if table.is_file():
        store.write_text(ARGS_FILE, table.read_text())


def _max_repeat(s: dict[str, Any]) -> int:
    repeats = [r.repeat for r in s["store"].typed_records() if isinstance(r.repeat, int)]
    return max(repeats, default=0)


def _manifest(sources: list[dict[str, Any]], problems: list[str]) -> dict[str, Any]:
    return {
        "matrix": _merged_matrix(sources),
        "arms": _merged_arms(sources),
        "merged_at": now_iso(),
        "pooled_despite": problems,
        "sources": [
            {
                "path": str(s["path"].resolve()),
                "machine": s["machine"],
                "host": s["manifest"].get("host"),
                "started_at": s["manifest"].get("started_at"),
                "finished_at": s["manifest"].get("finished_at"),
                "specbench_version": s["manifest"].get("specbench_version"),
                "arms": s["manifest"].get("arms") or {},
            }
            for s in sources
        ],
    }
