"""Checks that catch the published mistakes (docs/mistakes.md, mistakes 1–10) from a run directory.

Each check returns :class:`Finding` objects: a code, the arm(s), and one sentence of evidence.
Codes: SILENT_FALLBACK, ACCEPTANCE_ARTEFACT, CONFOUND, OUTPUT_DRIFT, TOOLCALL_MISMATCH
(statistical ones — LOW_N, UNSTABLE, DRIFT, BIMODAL, SPEC_LOSS — come from :mod:`specbench.stats`
via :mod:`specbench.analysis`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.engines.base import Engine
from specbench.engines.llamacpp import LlamaCppEngine

_LLAMACPP = LlamaCppEngine(Path("llama-server"))
FALLBACK_SHARE = 0.9  # speculation configured but no drafting on at least this share of requests
SOURCE_TOLERANCE = 0.02  # acceptance sources may differ by this much before it is a finding


@dataclass(frozen=True)
class Finding:
    code: str
    arms: tuple[str, ...]
    evidence: str
    severity: str = "warning"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- which arms speculate ---------------------------------------------------------------------
def split_flags(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """argv → [(flag, value or None)]: a flag takes the next item unless that is another flag."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        flag = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        takes = nxt is not None and (not nxt.startswith("-") or _is_number(nxt))
        out.append((flag, nxt if takes else None))
        i += 2 if takes else 1
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def is_spec_flag(flag: str, engine: Engine = _LLAMACPP) -> bool:
    return engine.is_spec_flag(flag)


def speculates(args: Sequence[str], engine: Engine = _LLAMACPP) -> bool:
    """Configured to speculate: any speculative flag other than ``--spec-type none``."""
    pairs = [(f, v) for f, v in split_flags(args) if engine.is_spec_flag(f)]
    return bool(pairs) and not all(f == "--spec-type" and v == "none" for f, v in pairs)


def non_spec_flags(args: Sequence[str], engine: Engine = _LLAMACPP) -> set[tuple[str, str | None]]:
    return {(f, v) for f, v in split_flags(args) if not engine.is_spec_flag(f)}


# -- checks -----------------------------------------------------------------------------------
def silent_fallback(
    arm: str,
    args: Sequence[str],
    df: pd.DataFrame,
    cells: list[dict[str, Any]],
    patterns: Sequence[str],
    engine: Engine = _LLAMACPP,
) -> list[Finding]:
    """Speculation configured, but nothing drafted, the server says it is off, or a failure line
    was logged."""
    if not speculates(args, engine):
        return []
    # Only requests whose server reports drafts per request: SGLang never does, vLLM only with
    # --per-request-spec-decode-metrics (NaN), and an unknown count is not a zero.
    reasons = []
    known = df.loc[df["arm"] == arm, "draft_n"].dropna()
    idle = float((known == 0).mean()) if len(known) else 0.0
    if idle >= FALLBACK_SHARE:
        reasons.append(f"no drafting on {idle:.0%} of {len(known)} requests")
    reasons += _server_says_off([c.get("server") or {} for c in cells if c["arm"] == arm])
    lines = [
        ln
        for c in cells
        if c["arm"] == arm
        for ln in c.get("log_lines", [])
        if any(p in ln for p in patterns)
    ]
    if lines:
        reasons.append(f"the server logged: {lines[0]!r}")
    if not reasons:
        return []
    return [
        Finding(
            "SILENT_FALLBACK",
            (arm,),
            f"{arm} is configured to speculate but " + "; ".join(reasons) + ".",
            "error",
        )
    ]


def _server_says_off(servers: list[dict[str, Any]]) -> list[str]:
    """What each engine's ``describe`` says when speculation did not take: llama.cpp /slots
    ``speculative: false``, vLLM without its spec counters (they exist only with a speculative
    config), SGLang's own ``speculative_algorithm`` None (docs/engines.md)."""
    out = []
    flags = [s for server in servers for s in server.get("slots_speculative", [])]
    if flags and not any(flags):
        out.append("/slots reports speculative=false")
    if any(server.get("spec_metrics_present") is False for server in servers):
        out.append("/metrics has no vllm:spec_decode counters")
    sglang = [server["speculative"] for server in servers if isinstance(server.get("speculative"), dict)]
    if any("speculative_algorithm" in s and s["speculative_algorithm"] is None for s in sglang):
        out.append("the server info says speculative_algorithm is None")
    return out


def acceptance_sources(
    arm: str, df: pd.DataFrame, cells: list[dict[str, Any]], engine: Engine = _LLAMACPP
) -> dict[str, dict[str, float]]:
    """Acceptance from every source, each with its definition's numbers."""
    sub = df[df["arm"] == arm]
    out: dict[str, dict[str, float]] = {}
    drafted = float(sub["draft_n"].fillna(0).sum())
    if drafted > 0:
        accepted = float(sub["draft_accepted"].fillna(0).sum())
        out["timings"] = {"drafted": drafted, "accepted": accepted, "rate": accepted / drafted}
    deltas = [spec_deltas(c) for c in cells if c["arm"] == arm]
    deltas = [d for d in deltas if d]
    if deltas and sum(d.get("draft_tokens", 0.0) for d in deltas) > 0:
        tot = {k: sum(d.get(k, 0.0) for d in deltas) for k in ("drafts", "draft_tokens", "accepted")}
        out["metrics"] = {
            "drafted": tot["draft_tokens"],
            "accepted": tot["accepted"],
            "rate": tot["accepted"] / tot["draft_tokens"],
            "mean_accepted_length": 1 + tot["accepted"] / tot["drafts"] if tot["drafts"] else np.nan,
        }
    parsed = [
        engine.parse_log_acceptance(ln) for c in cells if c["arm"] == arm for ln in c.get("log_lines", [])
    ]
    pairs = [(int(p["accepted"]), int(p["drafted"])) for p in parsed if p and "drafted" in p]
    if pairs and sum(g for _, g in pairs) > 0:
        acc, gen = sum(a for a, _ in pairs), sum(g for _, g in pairs)
        out["log"] = {"drafted": float(gen), "accepted": float(acc), "rate": acc / gen}
    return out


def spec_deltas(cell: Mapping[str, Any]) -> dict[str, float]:
    """after − before for every speculative counter the cell's "after" /metrics scrape has."""
    before = (cell.get("metrics_before") or {}).get("spec") or {}
    after = (cell.get("metrics_after") or {}).get("spec") or {}
    return {k: float(v) - float(before.get(k, 0.0)) for k, v in after.items()}


def acceptance_artefact(arm: str, df: pd.DataFrame, sources: dict[str, dict[str, float]]) -> list[Finding]:
    """Accepted == drafted on every drafting request, or two sources disagree."""
    out = []
    drafting = df[(df["arm"] == arm) & (df["draft_n"].fillna(0) > 0)]
    if len(drafting) >= 3 and bool((drafting["draft_accepted"] == drafting["draft_n"]).all()):
        others = [name for name, src in sources.items() if name != "timings"]
        agree = all(abs(sources[n]["rate"] - 1.0) <= SOURCE_TOLERANCE for n in others)
        check = f"{' and '.join(others)} agree" if others and agree else "no independent source confirms it"
        out.append(
            Finding(
                "ACCEPTANCE_ARTEFACT",
                (arm,),
                f"{arm}: accepted == drafted on all {len(drafting)} drafting requests ({check}); 100 % "
                "is often a counter that sees only re-verified tokens — check the drafter's own counters.",
            )
        )
    rates = {name: s["rate"] for name, s in sources.items()}
    if len(rates) >= 2 and max(rates.values()) - min(rates.values()) > SOURCE_TOLERANCE:
        detail = ", ".join(f"{k} {v:.3f}" for k, v in rates.items())
        out.append(Finding("ACCEPTANCE_ARTEFACT", (arm,), f"{arm}: acceptance sources disagree ({detail})."))
    return out


def confounds(
    arms: dict[str, Sequence[str]],
    baseline: str,
    env_by_arm: dict[str, dict[str, Any]] | None = None,
    engine: Engine = _LLAMACPP,
) -> list[Finding]:
    """Arms that differ from the baseline in anything but speculative flags."""
    out = []
    base = non_spec_flags(arms[baseline], engine)
    for arm, args in arms.items():
        if arm == baseline:
            continue
        mine = non_spec_flags(args, engine)
        if mine != base:
            diff = sorted({f for f, _ in mine ^ base})
            out.append(
                Finding(
                    "CONFOUND",
                    (baseline, arm),
                    f"{arm} differs from {baseline} in non-speculative flags {', '.join(diff)}.",
                    "error",
                )
            )
    for key, values in _env_differences(env_by_arm or {}).items():
        out.append(Finding("CONFOUND", tuple(sorted(values)), f"arms differ in {key}: {values}.", "error"))
    return out


def _env_differences(env_by_arm: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = {k for env in env_by_arm.values() for k in env}
    return {
        k: {a: e.get(k) for a, e in env_by_arm.items()}
        for k in keys
        if len({str(e.get(k)) for e in env_by_arm.values()}) > 1
    }


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


def output_texts(records: list[dict[str, Any]]) -> pd.DataFrame:
    from specbench.metrics import output_text

    rows = [
        {
            "arm": r["arm"],
            "prompt_id": r["prompt_id"],
            "repeat": r["repeat"],
            "category": r.get("category"),
            "text": output_text(r),
            "temperature": (r.get("request") or {}).get("temperature"),
        }
        for r in records
        if r.get("error") is None and not r.get("warmup")
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
                    "OUTPUT_DRIFT",
                    (baseline, arm),
                    f"{arm}: {1 - eq.exact_match_rate:.0%} of {eq.pairs} greedy outputs differ from "
                    f"{baseline} (mean Levenshtein {eq.mean_levenshtein:.0f} chars, normalised drift "
                    f"{eq.mean_normalised_drift:.3f}).",
                )
            )
    return out


# -- tool-call integrity ----------------------------------------------------------------------
def tool_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Reassemble streamed tool calls: deltas carry ``index``, a name once, argument fragments."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in record.get("chunks", []):
        for delta in chunk[3] or []:
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


def toolcall_mismatch(records: list[dict[str, Any]], arms: Sequence[str], baseline: str) -> list[Finding]:
    """Per (prompt, repeat): the arm's tool calls must match the baseline's name, JSON validity and keys."""
    sigs: dict[tuple[str, str, int], list[tuple[str, bool, tuple[str, ...]]]] = {}
    for rec in records:
        if rec.get("error") is None and not rec.get("warmup"):
            sigs[(rec["arm"], rec["prompt_id"], rec["repeat"])] = [call_signature(c) for c in tool_calls(rec)]
    out = []
    for arm in arms:
        pairs = [(sig, sigs.get((baseline, p, r))) for (a, p, r), sig in sigs.items() if a == arm]
        compared = [(s, b) for s, b in pairs if b is not None and (s or b)]
        bad = sum(1 for s, b in compared if s != b)
        invalid = sum(1 for s, _ in compared for c in s if not c[1])
        if arm != baseline and (bad or invalid):
            out.append(
                Finding(
                    "TOOLCALL_MISMATCH",
                    (baseline, arm),
                    f"{arm}: {bad} of {len(compared)} requests with tool calls differ from {baseline} in "
                    f"function name, JSON validity or argument keys ({invalid} with invalid JSON).",
                    "error",
                )
            )
    return out
