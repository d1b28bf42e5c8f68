"""Acceptance from every source the server offers, each with what it covers.

Sources only disagree meaningfully when they count the same requests. Each source says what it
saw (``coverage``) and whether that is the cell's measured requests exactly (``partial`` False):

* ``timings`` — per-request counts of the measured requests (warm-ups are never in the frame);
* ``metrics`` — /metrics counter deltas, scraped after the warm-ups and after the last request;
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

from specbench.analysis import passes
from specbench.analysis.finding import Finding
from specbench.analysis.speculation import spec_deltas
from specbench.engines.base import Engine

Source = dict[str, Any]  # drafted, accepted, rate, [mean_accepted_length], coverage, partial
SOURCE_TOLERANCE = 0.02  # comparable sources may differ by this much before it is a finding
MEASURED = "measured"  # cells.jsonl "log_window": acceptance lines cover only measured requests


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
        out["timings"] = make_source(drafted, accepted, f"{n} measured requests (warm-ups excluded)", False)
    metrics = _metrics_source(mine)
    if metrics:
        out["metrics"] = metrics
    log = _log_source(mine, sub, engine)
    if log:
        out["log"] = log
    return out


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


def arm_acceptance(sources: Mapping[str, Source]) -> tuple[float, str]:
    """The arm's acceptance for tables and theory: per-request timings when the server gave them,
    else the /metrics counter deltas (vLLM without per-request metrics), with the source's name."""
    for name in ("timings", "metrics"):
        if name in sources:
            return float(sources[name]["rate"]), name
    return float("nan"), ""


def acceptance_artefact(
    arm: str,
    df: pd.DataFrame,
    sources: Mapping[str, Source],
    records: Sequence[Mapping[str, Any]] = (),
    cells: Sequence[Mapping[str, Any]] = (),
) -> list[Finding]:
    """Accepted == drafted on every drafting request, or two sources over the same requests disagree.
    ``records`` and ``cells``: the run's, for a one-token-per-chunk stream's passes (passes.py)."""
    out = []
    full = comparable(sources)
    drafting = df[(df["arm"] == arm) & (df["draft_n"].fillna(0) > 0)]
    if len(drafting) >= 3 and bool((drafting["draft_accepted"] == drafting["draft_n"]).all()):
        others = [name for name in full if name != "timings"]
        agree = all(abs(full[n]["rate"] - 1.0) <= SOURCE_TOLERANCE for n in others)
        check = f"{' and '.join(others)} agree" if others and agree else "no independent source confirms it"
        stream, confirmed = _stream_says(arm, drafting, full.get("metrics"), records, cells, df)
        out.append(
            Finding(
                "ACCEPTANCE_ARTEFACT",
                (arm,),
                f"{arm}: accepted == drafted on all {len(drafting)} drafting requests ({check}); 100 % "
                "is often a counter that sees only re-verified tokens — "
                + (stream or "check the drafter's own counters."),
                "info" if confirmed else "warning",
            )
        )
    rates = {name: s["rate"] for name, s in full.items()}
    if len(rates) >= 2 and max(rates.values()) - min(rates.values()) > SOURCE_TOLERANCE:
        detail = ", ".join(f"{k} {v:.3f}" for k, v in rates.items())
        out.append(
            Finding(
                "ACCEPTANCE_ARTEFACT",
                (arm,),
                f"{arm}: acceptance sources disagree over the same measured requests ({detail}).",
            )
        )
    return out


def _stream_says(
    arm: str,
    drafting: pd.DataFrame,
    metrics: Source | None,
    records: Sequence[Mapping[str, Any]],
    cells: Sequence[Mapping[str, Any]],
    df: pd.DataFrame,
) -> tuple[str, bool]:
    """(what the client's stream says of the 100 %, whether it confirms it): tokens per chunk
    where a chunk is a verification step (vLLM), else the passes a one-token-per-chunk stream
    shows in its bursts (llama.cpp; needs the records)."""
    steps = _stream_confirms(drafting, metrics)
    if steps or not records or not passes.one_token_per_chunk(drafting):
        return steps, bool(steps)
    said, sentence = passes.verdict(passes.arm_passes(arm, records, cells, df))
    return sentence, said == "confirms"


STREAM_TOLERANCE = 0.10  # tokens per streamed chunk within this of the counters' tokens per step


def _stream_confirms(drafting: pd.DataFrame, metrics: Source | None) -> str:
    """A sentence when the client's own stream confirms the counters, else "".

    A server that sends each verification step's tokens as one chunk (vLLM) shows its real
    acceptance in the stream: tokens per chunk ≈ 1 + accepted / drafts. A counter that saw only
    re-verified tokens would claim K + 1 per step while the stream shows fewer. llama.cpp sends one
    token per chunk, so there tokens per chunk say nothing: its passes are counted from the
    stream's bursts instead (:mod:`specbench.analysis.passes`)."""
    if metrics is None or not {"tokens_per_chunk", "output_tokens"} <= set(drafting.columns):
        return ""
    per_step = float(metrics.get("mean_accepted_length", np.nan))
    per_chunk = float(drafting["tokens_per_chunk"].mean())
    if not (np.isfinite(per_step) and np.isfinite(per_chunk)) or per_chunk <= 1.0:
        return ""
    n = drafting["output_tokens"].to_numpy(np.float64)
    expected = float(np.mean(n / (1.0 + (n - 1.0) / per_step)))  # the first token is prefill's chunk
    if not abs(per_chunk / expected - 1.0) <= STREAM_TOLERANCE:
        return ""
    return (
        f"here the stream confirms it: {per_chunk:.2f} tokens per streamed chunk, {expected:.2f} "
        f"expected at the counters' {per_step:.2f} tokens per verification step."
    )
