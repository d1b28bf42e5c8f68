"""Checks that catch the published mistakes (docs/mistakes.md, mistakes 1–10) from a run directory.

Each check returns :class:`Finding` objects: a code, the arm(s), and one sentence of evidence.
Codes: SILENT_FALLBACK, NO_DRAFTS, ACCEPTANCE_ARTEFACT, SELF_DRAFT, CONFOUND, OUTPUT_DRIFT, TOOLCALL_MISMATCH
(statistical ones — LOW_N, UNSTABLE, DRIFT, BIMODAL, SPEC_LOSS — come from :mod:`specbench.analysis.stats`
via :mod:`specbench.analysis`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import settings, sources
from specbench.analysis.finding import Finding
from specbench.analysis.packed import packed
from specbench.analysis.sources import SOURCE_TOLERANCE, Source
from specbench.analysis.speculation import FALLBACK_SHARE, spec_deltas, speculation_state
from specbench.engines.argstore import StoredArgs
from specbench.engines.base import Engine, split_flags
from specbench.store.rundir import file_sha256
from specbench.store.schema import chunks

__all__ = ["FALLBACK_SHARE", "SOURCE_TOLERANCE", "Finding", "spec_deltas", "split_flags"]


# -- which arms speculate: the engine decides (engines/base.py) ------------------------------
def is_spec_flag(flag: str, engine: Engine) -> bool:
    return engine.is_spec_flag(flag)


def speculates(args: Sequence[str], engine: Engine) -> bool:
    """Configured to speculate, by ``engine``'s flag rules (llama.cpp: not ``--spec-type none``)."""
    return engine.speculates(args)


# -- checks -----------------------------------------------------------------------------------
def silent_fallback(
    arm: str,
    args: Sequence[str],
    df: pd.DataFrame,
    cells: list[dict[str, Any]],
    patterns: Sequence[str],
    engine: Engine,
) -> list[Finding]:
    """SILENT_FALLBACK (speculation off or broken) or NO_DRAFTS (on, but nothing proposed) for an
    arm configured to speculate (:mod:`specbench.analysis.speculation`)."""
    if not speculates(args, engine):
        return []
    return speculation_state(arm, df, cells, patterns, engine)


# The acceptance checks live in sources.py (every source with its numbers and coverage, and
# ACCEPTANCE_ARTEFACT); the judge reads every check through this module, so they are named here.
acceptance_sources = sources.acceptance_sources
acceptance_artefact = sources.acceptance_artefact


def self_draft(
    arm: str,
    args: Sequence[str],
    model: str,
    engine: Engine,
    env: Mapping[str, Any] | None = None,
    found: Mapping[str, Source] | None = None,
) -> Finding | None:
    """The draft model is the target model itself — the same path, a link to it or a byte-identical
    copy: 100 % acceptance is expected, not an artefact. Content decides: the SHA-256 ``env.json``
    recorded for the arm's draft (``arm_files``: ``same_as_target``), else the two files' own
    SHA-256 where both are on this machine. ``found``: the arm's acceptance sources, quoted."""
    draft = engine.draft_model(list(args))
    if draft is None or not model or not (how := _same_file(draft, model, _recorded(env, arm, draft))):
        return None
    rates = ", ".join(f"{name} {s['rate']:.3f}" for name, s in (found or {}).items())
    return Finding(
        "SELF_DRAFT",
        (arm,),
        f"{arm} drafts with the target model itself ({draft}: {how}): acceptance near 100 % is expected "
        + (f"(here {rates}) " if rates else "")
        + "and says nothing about a real draft; with every draft accepted, the speedup measures what a "
        "round costs (K draft passes of the full target model plus one verification pass) against the "
        "K + 1 tokens it yields, not what a smaller draft would gain.",
        "info",
    )


def _recorded(env: Mapping[str, Any] | None, arm: str, draft: str) -> bool | None:
    """What ``env.json`` says of the draft file's content: True same SHA-256 as the target, False
    another, None where it recorded nothing for that file (an older run, a ``--flag=value`` form)."""
    target = str(((env or {}).get("model") or {}).get("sha256") or "")
    for rec in ((env or {}).get("arm_files") or {}).get(arm) or []:
        if isinstance(rec, Mapping) and rec.get("path") == draft and rec.get("sha256"):
            same = rec.get("same_as_target")
            return bool(same) if isinstance(same, bool) else (rec["sha256"] == target if target else None)
    return None


def _same_file(a: str, b: str, recorded: bool | None = None) -> str:
    """How the draft ``a`` is the target ``b`` ("" when it is not): by the recorded SHA-256, else by
    path or link, else by the files' own SHA-256 (equal sizes first: models are hundreds of MB)."""
    if recorded is not None:
        return "the SHA-256 recorded in env.json is the target's" if recorded else ""
    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve() or (pa.exists() and pb.exists() and pa.samefile(pb)):
            return "the same file"
        if pa.is_file() and pb.is_file() and pa.stat().st_size == pb.stat().st_size:
            return "a byte-identical copy (same SHA-256)" if file_sha256(pa) == file_sha256(pb) else ""
    except OSError:
        return "the same path" if a == b else ""
    return ""


def confounds(
    arms: Mapping[str, Sequence[str]],
    baseline: str,
    engine: Engine,
    env_by_arm: dict[str, dict[str, Any]] | None = None,
    cells: Sequence[Mapping[str, Any]] | None = None,
    stored: StoredArgs | None = None,
) -> list[Finding]:
    """Arms whose effective non-speculative settings differ from the baseline's
    (:mod:`specbench.analysis.settings`). ``arms``: each arm's full argv, ``common_args`` first
    (``RunData.arm_args``); ``cells``: the run's cells, whose server reports decide; ``stored``:
    the argument table the run stored (``RunData.engine_args``), which alone decides where present
    (the engine installed where the report is made is asked only for a run that stored none)."""
    out = []
    table, how = settings.argument_table(engine, stored)
    spelt = settings.spellings(list(arms.values()), table)
    said = settings.reported(cells or [], engine)
    base = settings.effective_settings(arms[baseline], engine, table)
    for arm, args in arms.items():
        if arm == baseline:
            continue
        mine = settings.effective_settings(args, engine, table)
        diff = settings.differences(mine, base, (said.get(arm, {}), said.get(baseline, {})), spelt)
        if diff:
            out.append(
                Finding(
                    "CONFOUND",
                    (baseline, arm),
                    f"{arm} differs from {baseline} in non-speculative settings: "
                    f"{'; '.join(d.describe() for d in diff)}. Compared by effective value "
                    f"(common_args merged, the last of repeated flags winning; aliases from {how}).",
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
    from specbench.analysis.metrics import output_text

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
    found = packed(record)  # packed: only its few rows with extras can carry tool calls
    for chunk in found.extra_rows() if found is not None else chunks(record):
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
