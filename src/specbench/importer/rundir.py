"""Building the run directory: one record per row, the manifest, the source copy and env."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.analysis.metrics import METRICS
from specbench.engines.openai import ImportedEngine
from specbench.importer.mapping import NUMERIC
from specbench.importer.values import as_int, as_num, str_or
from specbench.store.rundir import RunStore, now_iso
from specbench.store.safeio import guarded, write_atomic
from specbench.store.schema import SCHEMA_VERSION, Chunk, RequestRecord


def build_records(table: pd.DataFrame, derived: dict[str, list[int]], name: str) -> list[RequestRecord]:
    """One record per row, in file order (``seq``): the only order an imported file records."""
    repeats = table.groupby(["arm", "prompt"], sort=False).cumcount().tolist()
    by_row: dict[int, list[str]] = {}
    for fld, rows in derived.items():
        for row in rows:
            by_row.setdefault(row, []).append(fld)
    out = []
    items = zip(table.index.tolist(), table.to_dict("records"), repeats, strict=True)
    for seq, (row, values, occurrence) in enumerate(items, start=1):
        given = as_num(values.get("repeat"))
        rec = _record(values, seq, int(given) if given is not None else int(occurrence))
        rec["source"] = {"file": name, "row": int(row), "derived": by_row.get(int(row), [])}
        out.append(rec)
    return out


def _record(row: dict[Any, Any], seq: int, repeat: int) -> RequestRecord:
    """The shape of a native record (drive.CellDriver._one) with ``imported`` values instead of
    raw chunks; metrics.frame prefers ``imported`` over anything computed from chunks."""
    num = {f: as_num(row.get(f)) for f in NUMERIC}
    usage = {"prompt_tokens": num["prompt_tokens"], "completion_tokens": num["output_tokens"]}
    rec: RequestRecord = {
        "arm": row["arm"],
        "repeat": repeat,
        "workload": str_or(row.get("workload"), "imported"),
        "prompt_id": row["prompt"],
        "category": str_or(row.get("category"), "imported"),
        "warmup": False,
        "seq": seq,
        "error": str_or(row.get("error"), None),
        "request": {"max_tokens": as_int(num["max_tokens"]), "temperature": num["temperature"]},
        "usage": {k: int(v) for k, v in usage.items() if v is not None},
        "chunks": _text_chunks(str_or(row.get("text"), None), num["ttft_ms"]),
        "imported": {f: v for f in METRICS if (v := num[f]) is not None},
    }
    if num["draft_n"] is not None:
        rec["timings"] = {"draft_n": int(num["draft_n"])}
        if num["draft_accepted"] is not None:
            rec["timings"]["draft_n_accepted"] = int(num["draft_accepted"])
    return rec


def _text_chunks(text: str | None, ttft_ms: float | None) -> list[Chunk]:
    """Output text, when the file has it, as one chunk so OUTPUT_DRIFT can compare arms. Its time
    is the file's TTFT, or NaN when unknown, so no latency is invented."""
    if text is None:
        return []
    t_ns = ttft_ms * 1e6 if ttft_ms is not None else float("nan")
    return [Chunk(t_ns, text, None, None, None)]


def build_manifest(
    path: Path,
    fmt: str,
    arm_flags: dict[str, list[str]],
    base: str,
    table: pd.DataFrame,
    columns: dict[str, str],
    flags: list[str],
    skipped: int,
) -> dict[str, Any]:
    names = table["workload"].map(lambda w: str_or(w, "imported")) if "workload" in table else ["imported"]
    workloads = sorted({str(w) for w in names})
    return {
        "imported": True,
        "matrix": {
            "engine": ImportedEngine.kind,
            "model": "",
            "common_args": [],
            "arms": arm_flags,
            "baseline": base,
            "workload": {
                "name": ",".join(workloads),
                "source": str(path),
                "format": fmt,
                "columns": columns,
                "flags": flags,
                "rows": int(len(table) + skipped),
                "skipped": skipped,
            },
        },
    }


def write_run(path: Path, out: Path, manifest: dict[str, Any], records: list[RequestRecord]) -> None:
    """Manifest, a copy of the source file, an env that says the machine is unknown, records."""
    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(out)
    store.create(manifest, resume=False)
    copy = out / "source" / path.name
    with guarded(copy):  # like every file of a run directory: whole or not at all, exit 5 on a full disk
        copy.parent.mkdir(exist_ok=True)
        write_atomic(copy, path.read_bytes())
    store.write_env(
        {
            "imported": True,
            "note": "imported results: the measuring machine is not recorded here",
            "source_file": str(path),
            "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "schema_version": SCHEMA_VERSION,
            "captured_at": now_iso(),
        }
    )
    # One fsync at the end: per-record fsync protects a live measurement from a crash, but an
    # import can simply be run again (and a 5000-row file took 20 s with it).
    store.append_records(records)
    for arm in manifest["matrix"]["arms"]:
        store.set_arm_status(arm, status="imported")
    store.update_manifest(finished_at=now_iso())
