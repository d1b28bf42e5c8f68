"""Did speculation run? The server's own word first, then cell-level counters, then requests.

Two different truths hide behind "nothing was drafted" and a published table must not mix them:

* speculation is **off or broken** — the server says so (each engine's ``server_says_off``:
  llama.cpp ``/slots`` ``speculative: false``, vLLM without its spec counters, SGLang
  ``speculative_algorithm`` None), it logged a
  failure line, or the arm's cell-level counters stayed at zero with no word from the server that
  speculation is on → ``SILENT_FALLBACK`` (error: the arm did not measure what it claims);
* speculation is **on but the drafter proposed nothing** on this workload — e.g. an n-gram drafter
  that finds no match in agent traffic, while ``/slots`` says ``speculative: true`` →
  ``NO_DRAFTS`` (warning: a real, publishable result about the method on this workload).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import pandas as pd

from specbench.analysis.evidence.acceptance import counter_drafts
from specbench.analysis.findings.family import ArmFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.engines.base import Engine


class Code(StrEnum):
    SILENT_FALLBACK = "SILENT_FALLBACK"
    NO_DRAFTS = "NO_DRAFTS"


SEVERITY = {Code.SILENT_FALLBACK: Severity.ERROR, Code.NO_DRAFTS: Severity.WARNING}
ANCHOR = "speculation"
FALLBACK_SHARE = 0.9  # no drafting on at least this share of requests


def check(ev: RunEvidence, arm: str) -> list[Finding]:
    """SILENT_FALLBACK or NO_DRAFTS for an arm configured to speculate (by its flags)."""
    run = ev.run
    return silent_fallback(arm, run.arm_args(arm), run.df, run.cells, ev.patterns, run.engine)


def silent_fallback(
    arm: str,
    args: Sequence[str],
    df: pd.DataFrame,
    cells: Sequence[Mapping[str, Any]],
    patterns: Sequence[str],
    engine: Engine,
) -> list[Finding]:
    """SILENT_FALLBACK (speculation off or broken) or NO_DRAFTS (on, but nothing proposed) for an
    arm configured to speculate, by ``engine``'s flag rules (llama.cpp: not ``--spec-type none``)."""
    if not engine.speculates(args):
        return []
    return speculation_state(arm, df, cells, patterns, engine)


def failure_lines(cells: Sequence[Mapping[str, Any]], patterns: Sequence[str]) -> list[str]:
    return [ln for c in cells for ln in c.get("log_lines", []) if any(p in ln for p in patterns)]


def speculation_state(
    arm: str,
    df: pd.DataFrame,
    cells: Sequence[Mapping[str, Any]],
    patterns: Sequence[str],
    engine: Engine,
) -> list[Finding]:
    """SILENT_FALLBACK or NO_DRAFTS for an arm *configured* to speculate (the caller decides that);
    what the server's self-description means is the engine's to say."""
    mine = [c for c in cells if c.get("arm") == arm]
    servers = [c.get("server") or {} for c in mine]
    off = engine.server_says_off(servers)
    failed = failure_lines(mine, patterns)
    if failed:
        off.append(f"the server logged: {failed[0]!r}")
    # Only requests whose server reports drafts per request: SGLang never does, vLLM only with
    # --per-request-spec-decode-metrics (NaN), and an unknown count is not a zero.
    known = df.loc[df["arm"] == arm, "draft_n"].dropna()
    idle = float((known == 0).mean()) if len(known) else 0.0
    idle_text = f"no drafting on {idle:.0%} of {len(known)} requests" if idle >= FALLBACK_SHARE else ""
    counters = counter_drafts(mine)
    zero_text = (
        f"its /metrics counters drafted 0 tokens over {counters[1]} cell(s)"
        if counters and counters[0] == 0
        else ""
    )
    idle_reasons = [t for t in (idle_text, zero_text) if t]
    if off:
        return [_fallback(arm, off + idle_reasons)]
    if not idle_reasons:
        return []
    on = engine.server_says_on(servers)
    if on is None:
        return [_fallback(arm, idle_reasons)]
    share = f"{idle:.0%} of {len(known)} requests" if len(known) else "the whole run (by its counters)"
    return [
        Finding(
            Code.NO_DRAFTS,
            (arm,),
            f"{arm}: speculation is on ({on}) but the drafter proposed nothing on {share}"
            f" ({'; '.join(idle_reasons)}): the method finds nothing to draft on this workload.",
            SEVERITY[Code.NO_DRAFTS],
        )
    ]


def _fallback(arm: str, reasons: list[str]) -> Finding:
    return Finding(
        Code.SILENT_FALLBACK,
        (arm,),
        f"{arm} is configured to speculate but " + "; ".join(reasons) + ".",
        SEVERITY[Code.SILENT_FALLBACK],
    )


FAMILY = ArmFamily(Code, SEVERITY, ANCHOR, check)
