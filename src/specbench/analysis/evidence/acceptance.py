"""Acceptance from every source the server offers, each with what it covers.

Sources only disagree meaningfully when they count the same requests. Each source says what it
saw (``coverage``) and whether that is the cell's measured requests exactly (``partial`` False):

* :data:`PER_REQUEST` — the server's per-request counts of the measured requests (warm-ups are
  never in the frame);
* :data:`COUNTERS` — /metrics counter deltas, scraped after the warm-ups and after the last request;
* ``log`` — per-request log lines (llama.cpp ``draft acceptance``), read after the server wrote
  the line of the cell's last request, from the offset where the measured requests began; or a
  periodic aggregate (vLLM's 10 s ``SpecDecoding metrics``, SGLang's accept length), which never
  lines up with a cell and is shown as partial, never compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench.engines.base import Engine

Source = dict[str, Any]  # drafted, accepted, rate, [mean_accepted_length], coverage, partial
MEASURED = "measured"  # cells.jsonl "log_window": acceptance lines cover only measured requests
#: The sources' names as tables, summaries and findings print them. The per-request source is
#: named after llama.cpp's response field that first carried the counts; the name is kept (every
#: engine's per-request counts go by it) so that reports of stored runs read as they always did.
PER_REQUEST = "timings"
COUNTERS = "metrics"
LOG = "log"


def acceptance_sources(
    arm: str, df: pd.DataFrame, cells: Sequence[Mapping[str, Any]], engine: Engine
) -> dict[str, Source]:
    """Acceptance from every source that saw drafted tokens, each with its coverage."""
    sub = df[df["arm"] == arm]
    mine = [c for c in cells if c.get("arm") == arm]
    out: dict[str, Source] = {}
    drafted = float(sub["draft_n"].fillna(0).sum())
    if drafted > 0:
        accepted = float(sub["draft_accepted"].fillna(0).sum())
        n = int(sub["draft_n"].notna().sum())
        out[PER_REQUEST] = make_source(drafted, accepted, f"{n} measured requests (warm-ups excluded)", False)
    metrics = _metrics_source(mine)
    if metrics:
        out[COUNTERS] = metrics
    log = _log_source(mine, sub, engine)
    if log:
        out[LOG] = log
    return out


def spec_deltas(cell: Mapping[str, Any]) -> dict[str, float]:
    """after − before for every speculative counter the cell's "after" /metrics scrape has."""
    before = (cell.get("metrics_before") or {}).get("spec") or {}
    after = (cell.get("metrics_after") or {}).get("spec") or {}
    return {k: float(v) - float(before.get(k, 0.0)) for k, v in after.items()}


def counter_drafts(cells: Sequence[Mapping[str, Any]]) -> tuple[float, int] | None:
    """(drafted tokens summed over the arm's cells, cells counted) from /metrics deltas; None when
    no cell scraped a draft-token counter (the engine has none, or /metrics failed)."""
    deltas = [spec_deltas(c) for c in cells]
    counted = [d["draft_tokens"] for d in deltas if "draft_tokens" in d]
    return (float(sum(counted)), len(counted)) if counted else None


def make_source(drafted: float, accepted: float, coverage: str, partial: bool) -> Source:
    return {
        "drafted": drafted,
        "accepted": accepted,
        "rate": accepted / drafted,
        "coverage": coverage,
        "partial": partial,
    }


def _metrics_source(cells: Sequence[Mapping[str, Any]]) -> Source | None:
    deltas = [d for d in (spec_deltas(c) for c in cells) if d]
    tot = {k: sum(d.get(k, 0.0) for d in deltas) for k in ("drafts", "draft_tokens", "accepted")}
    if tot["draft_tokens"] <= 0:
        return None
    missing = len(cells) - len(deltas)
    coverage = f"counter deltas over the measured requests of {len(deltas)} cell(s)"
    src = make_source(tot["draft_tokens"], tot["accepted"], coverage, missing > 0)
    if missing:
        src["coverage"] += f"; {missing} cell(s) without a scrape"
    src["mean_accepted_length"] = 1 + tot["accepted"] / tot["drafts"] if tot["drafts"] else np.nan
    return src


def _log_source(cells: Sequence[Mapping[str, Any]], sub: pd.DataFrame, engine: Engine) -> Source | None:
    acc = gen = 0
    gaps: list[str] = []
    for cell in cells:
        parsed = [engine.parse_log_acceptance(ln) for ln in cell.get("log_lines", [])]
        pairs = [(int(p["accepted"]), int(p["drafted"])) for p in parsed if p and "drafted" in p]
        acc += sum(a for a, _ in pairs)
        gen += sum(g for _, g in pairs)
        gaps += _log_gaps(cell, len(pairs), sub, engine)
    if gen <= 0:
        return None
    if engine.log_acceptance_scope != "request":
        return make_source(
            gen, acc, "periodic aggregate lines over time windows, not the cell's requests", True
        )
    coverage = "one line per measured drafting request"
    return make_source(gen, acc, coverage + (f"; {', '.join(sorted(set(gaps)))}" if gaps else ""), bool(gaps))


def _log_gaps(cell: Mapping[str, Any], lines: int, sub: pd.DataFrame, engine: Engine) -> list[str]:
    """Why one cell's per-request lines do not cover exactly its measured drafting requests."""
    if engine.log_acceptance_scope != "request":
        return []
    if cell.get("log_window") != MEASURED:
        return ["lines from the whole launch, warm-ups included"]
    drafting = int((sub.loc[sub["repeat"] == cell.get("repeat"), "draft_n"].fillna(0) > 0).sum())
    if lines < drafting:
        return [f"lines for {lines} of {drafting} drafting requests in repeat {cell.get('repeat')}"]
    return []


def comparable(sources: Mapping[str, Source]) -> dict[str, Source]:
    return {k: s for k, s in sources.items() if not s.get("partial")}


def preferred_rate(sources: Mapping[str, Source]) -> tuple[float, str]:
    """The arm's acceptance for tables and theory: the per-request counts when the server gave
    them, else the /metrics counter deltas (vLLM without per-request metrics), with the source's
    name."""
    for name in (PER_REQUEST, COUNTERS):
        if name in sources:
            return float(sources[name]["rate"]), name
    return float("nan"), ""
