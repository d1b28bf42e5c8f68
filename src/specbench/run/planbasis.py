"""Which earlier run may time a new one (:mod:`specbench.run.plan`'s first basis), and its rates.

A basis is a finished, never resumed run of the same model, engine and arm arguments (the common
arguments with each arm's, compared as a set: the arms' names do not matter, their flags do) on
this host, in ``--out`` or beside it, with no failed arm and at least :data:`MIN_BASIS_REQUESTS`
measured requests of which at most :data:`MAX_BASIS_ERRORS` failed: a failed 4-request run or one
cut short says nothing about the time of a full one. The newest such run is used. Everything here
reads files other runs wrote (possibly damaged, possibly not runs at all), so anything unreadable
is skipped, never raised.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from specbench.analysis.metrics import output_tokens
from specbench.engines import DEFAULT_ENGINE, read_record
from specbench.matrix.config import Matrix
from specbench.store.record import Record
from specbench.store.redact import mask_args
from specbench.workloads.length import CHARS_PER_TOKEN_ESTIMATE

MIN_BASIS_REQUESTS = 10  # an earlier run with fewer measured requests is too small to time this one
MAX_BASIS_ERRORS = 0.1  # nor one where more than this share of its measured requests failed


def previous_rate(matrix: Matrix, out: Path) -> tuple[float, Path] | None:
    """Seconds per generated token (launches included) of the newest finished, never resumed
    run of ``matrix``'s model, engine and arms on this host among ``out`` and its siblings that
    can serve as a basis (see the module docstring); None if there is none. A folder that cannot
    be read as a run (a malformed manifest.json, records that are not JSON objects) is skipped,
    not an error: the estimate is a courtesy and must never stop a run."""
    host = platform.node()
    found: list[tuple[str, float, Path]] = []
    work = _work(matrix.engine, matrix.model, matrix.common_args, matrix.arms.values())
    for folder in {out, *_siblings(out)}:
        try:
            info = _rate(folder, work, host)
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            info = None
        if info is not None:
            found.append((*info, folder))
    if not found:
        return None
    _, rate, run = max(found)
    return rate, run


def _siblings(out: Path) -> list[Path]:
    try:
        return list(out.parent.iterdir()) if out.parent.is_dir() else []
    except OSError:  # an unreadable parent: no earlier run to learn from
        return []


def _manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / "manifest.json"
    if not path.is_file():  # a directory or a FIFO named manifest.json is not read (a FIFO would hang)
        return None
    manifest = json.loads(path.read_text())
    return manifest if isinstance(manifest, dict) else None


Work = tuple[str, str, list[tuple[str, ...]]]


def _work(engine: object, model: object, common: Any, arms: Any) -> Work:
    """What makes two runs' time per token comparable: engine, model and every arm's arguments
    (secret values masked, as the manifest stores them), in no particular order."""
    args = sorted(tuple(mask_args([*map(str, common), *map(str, a)])) for a in arms)
    return str(engine), str(model), args


def _stored_work(matrix: dict[str, Any]) -> Work | None:
    arms, common = matrix.get("arms"), matrix.get("common_args") or []
    if not isinstance(arms, dict) or not isinstance(common, list):
        return None
    if not all(isinstance(a, list) for a in arms.values()):
        return None
    return _work(matrix.get("engine", DEFAULT_ENGINE), matrix.get("model"), common, arms.values())


def _rate(folder: Path, work: Work, host: str) -> tuple[str, float] | None:
    manifest = _manifest(folder)
    if manifest is None:
        return None
    matrix = manifest.get("matrix")
    same = manifest.get("host") == host and isinstance(matrix, dict) and _stored_work(matrix) == work
    started, finished = manifest.get("started_at"), manifest.get("finished_at")
    if (
        not same
        or not isinstance(started, str)
        or not isinstance(finished, str)
        or manifest.get("resumed_at")
    ):
        return None
    if any(
        isinstance(a, dict) and a.get("status") == "failed" for a in (manifest.get("arms") or {}).values()
    ):
        return None  # a failed arm's launches ended early: its wall time times nothing
    wall = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    records = _records(folder)
    measured = [r for r in records if not r.warmup]
    failed = sum(bool(r.error) for r in measured)
    if len(measured) - failed < MIN_BASIS_REQUESTS or failed > MAX_BASIS_ERRORS * len(measured):
        return None
    tokens = sum(_tokens(r) for r in records)
    return (finished, wall / tokens) if tokens > 0 and wall > 0 else None


def estimated_prompt_tokens(messages: Sequence[Any], target_tokens: int | None = None) -> float:
    """A prompt's length as the plan counts it: its fitted length, else estimated from its text
    (as :mod:`specbench.workloads.length` does without a tokenizer)."""
    if target_tokens:
        return float(target_tokens)
    text = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
    return text / CHARS_PER_TOKEN_ESTIMATE + 4 * len(messages)


def _prompt_units(manifest: dict[str, Any]) -> dict[str, float]:
    """prompt id → its length as the plan counts it, from the manifest's prompts."""
    out = {}
    for p in manifest.get("prompts") or []:
        if isinstance(p, dict) and isinstance(p.get("messages"), list):
            target = p.get("target_tokens") if isinstance(p.get("target_tokens"), int) else None
            out[str(p.get("prompt_id"))] = estimated_prompt_tokens(p["messages"], target)
    return out


def prefill_rate(run: Path) -> tuple[float, float] | None:
    """(seconds per generated token without prefill, seconds per prompt token) of a basis run
    whose records carry the server's prefill time (llama.cpp gives it per request); None
    where they do not (the plain rate then includes prefill). A prompt token is counted as the
    plan counts it (:func:`estimated_prompt_tokens` of the manifest's prompts): a tokenizer that
    makes four times the tokens of the estimate (a lab model's small vocabulary) then scales the
    rate, not the count, so the new run's estimated count times the rate is its prefill time."""
    try:
        manifest, records = _manifest(run) or {}, _records(run)
        wall = (
            datetime.fromisoformat(manifest["finished_at"]) - datetime.fromisoformat(manifest["started_at"])
        ).total_seconds()
        units = _prompt_units(manifest)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    total_s, counted_s, counted = 0.0, 0.0, 0.0
    for r in records:
        ms, n = r.counts.prefill_ms, r.counts.prompt_processed  # processed: a cached prefix is not
        if ms is None or n is None or n <= 0:
            continue
        total_s += ms / 1000
        unit = units.get(str(r.prompt_id)) if units else float(n)
        if unit:
            counted_s, counted = counted_s + ms / 1000, counted + unit
    tokens = sum(_tokens(r) for r in records)
    if counted <= 0 or counted_s <= 0 or tokens <= 0 or wall <= total_s:
        return None
    return (wall - total_s) / tokens, counted_s / counted


def _records(folder: Path) -> list[Record]:
    out = []
    for line in _lines(folder / "records.jsonl"):
        try:
            row = json.loads(line)
        except ValueError:  # a half-written last line
            continue
        if isinstance(row, dict):
            out.append(read_record(row))
    return out


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    try:
        return path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def _tokens(row: Record) -> float:
    try:
        value = output_tokens(row)
    except (ValueError, TypeError, AttributeError):
        return 0.0
    return value if value == value else 0.0  # NaN: a failed request generated nothing we know of
