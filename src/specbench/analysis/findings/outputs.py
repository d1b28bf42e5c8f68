"""Did speculation change what the model says? OUTPUT_DRIFT (greedy outputs that differ from the
baseline's) and TOOLCALL_MISMATCH (tool calls that differ in name, JSON validity or keys).

At temperature 0 a speculative arm should answer exactly as its baseline does: whatever a draft
proposes, the target verifies it. The same comparisons (:func:`output_equivalence`) fill the
report's output-equivalence table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.analysis.packed import packed
from specbench.store.record import Record


class Code(StrEnum):
    OUTPUT_DRIFT = "OUTPUT_DRIFT"
    TOOLCALL_MISMATCH = "TOOLCALL_MISMATCH"


SEVERITY = {Code.OUTPUT_DRIFT: Severity.WARNING, Code.TOOLCALL_MISMATCH: Severity.ERROR}
ANCHOR = "outputs"


def check(ev: RunEvidence) -> list[Finding]:
    run = ev.run
    if run.baseline not in run.arms:
        return []
    drift = output_drift(output_texts(run.records), run.measured_arms, run.baseline)
    return drift + toolcall_mismatch(run.records, run.measured_arms, run.baseline)


# -- output equivalence -----------------------------------------------------------------------
@dataclass(frozen=True)
class Equivalence:
    """Outputs of an arm vs the baseline for the same (prompt, repeat)."""

    arm: str
    pairs: int
    exact_match_rate: float
    mean_levenshtein: float
    mean_normalised_drift: float  # Levenshtein / max(len): 0 identical, 1 nothing shared
    median_first_divergence: float  # characters before the first difference (NaN: all identical)


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first differing character, None when identical."""
    if a == b:
        return None
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def output_equivalence(texts: pd.DataFrame, arm: str, baseline: str) -> Equivalence:
    """``texts`` has columns arm, prompt_id, repeat, text (see :func:`output_texts`)."""
    from rapidfuzz.distance import Levenshtein

    keys = ["prompt_id", "repeat"]
    a = texts[texts["arm"] == arm].set_index(keys)["text"]
    b = texts[texts["arm"] == baseline].set_index(keys)["text"]
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner")
    if joined.empty:
        return Equivalence(arm, 0, np.nan, np.nan, np.nan, np.nan)
    dist = [Levenshtein.distance(x, y) for x, y in zip(joined["a"], joined["b"], strict=True)]
    norm = [Levenshtein.normalized_distance(x, y) for x, y in zip(joined["a"], joined["b"], strict=True)]
    firsts = [
        d for x, y in zip(joined["a"], joined["b"], strict=True) if (d := first_divergence(x, y)) is not None
    ]
    return Equivalence(
        arm,
        len(joined),
        float(np.mean(np.array(dist) == 0)),
        float(np.mean(dist)),
        float(np.mean(norm)),
        float(np.median(firsts)) if firsts else np.nan,
    )


def output_texts(records: Sequence[Record]) -> pd.DataFrame:
    from specbench.analysis.metrics import output_text

    rows = [
        {
            "arm": r.arm,
            "prompt_id": r.prompt_id,
            "repeat": r.repeat,
            "category": r.category,
            "text": output_text(r),
            "temperature": r.temperature,
        }
        for r in records
        if r.measured
    ]
    return pd.DataFrame(rows, columns=["arm", "prompt_id", "repeat", "category", "text", "temperature"])


def output_drift(texts: pd.DataFrame, arms: Sequence[str], baseline: str) -> list[Finding]:
    """At temperature 0 speculative output should equal the baseline's; often it does not."""
    greedy = texts[texts["temperature"].fillna(0) == 0]
    out = []
    for arm in arms:
        if arm == baseline:
            continue
        eq = output_equivalence(greedy, arm, baseline)
        if eq.pairs and eq.exact_match_rate < 1.0:
            out.append(
                Finding(
                    Code.OUTPUT_DRIFT,
                    (baseline, arm),
                    f"{arm}: {1 - eq.exact_match_rate:.0%} of {eq.pairs} greedy outputs differ from "
                    f"{baseline} (mean Levenshtein {eq.mean_levenshtein:.0f} chars, normalised drift "
                    f"{eq.mean_normalised_drift:.3f}).",
                )
            )
    return out


# -- tool-call integrity ----------------------------------------------------------------------
def tool_calls(record: Record) -> list[dict[str, Any]]:
    """Reassemble streamed tool calls: deltas carry ``index``, a name once, argument fragments."""
    calls: dict[int, dict[str, Any]] = {}
    found = packed(record)  # packed: only its few rows with extras can carry tool calls
    for chunk in found.extra_rows() if found is not None else record.chunk_rows():
        for delta in chunk.tool_calls or []:
            call = calls.setdefault(int(delta.get("index", 0)), {"name": "", "arguments": ""})
            fn = delta.get("function") or {}
            call["name"] += fn.get("name") or ""
            call["arguments"] += fn.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def call_signature(call: dict[str, Any]) -> tuple[str, bool, tuple[str, ...]]:
    """(function name, arguments are valid JSON, sorted argument keys)."""
    try:
        args = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        return call["name"], False, ()
    return call["name"], True, tuple(sorted(args)) if isinstance(args, dict) else ()


def toolcall_mismatch(records: Sequence[Record], arms: Sequence[str], baseline: str) -> list[Finding]:
    """Per (prompt, repeat): the arm's tool calls must match the baseline's name, JSON validity and keys."""
    sigs: dict[tuple[str, str, int], list[tuple[str, bool, tuple[str, ...]]]] = {}
    for rec in records:
        if rec.measured:
            sigs[rec.key] = [call_signature(c) for c in tool_calls(rec)]
    out = []
    for arm in arms:
        pairs = [(sig, sigs.get((baseline, p, r))) for (a, p, r), sig in sigs.items() if a == arm]
        compared = [(s, b) for s, b in pairs if b is not None and (s or b)]
        bad = sum(1 for s, b in compared if s != b)
        invalid = sum(1 for s, _ in compared for c in s if not c[1])
        if arm != baseline and (bad or invalid):
            out.append(
                Finding(
                    Code.TOOLCALL_MISMATCH,
                    (baseline, arm),
                    f"{arm}: {bad} of {len(compared)} requests with tool calls differ from {baseline} in "
                    f"function name, JSON validity or argument keys ({invalid} with invalid JSON).",
                    SEVERITY[Code.TOOLCALL_MISMATCH],
                )
            )
    return out


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
