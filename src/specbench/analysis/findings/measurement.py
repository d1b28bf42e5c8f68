"""Checks on what each request's own numbers say about the measurement itself.

* ``CACHED_PREFILL`` — a request meant to be cold took most of its prompt from the server's
  cache, so its TTFT and prefill are a cache hit, not a prefill;
* ``CLIENT_SERVER_DISAGREE`` — the client's decode rate and the server's own timing of the same
  request disagree (a stalled stream delivers every token at once and reads thousands of tok/s);
  the summary then uses the server's rate for that request (:func:`specbench.analysis.metrics.decode_tok_s`);
* ``UNTIMED_DECODE`` — a request's token chunks reached the client bunched (a CPU vLLM starved
  of CPU sends a whole answer at once; a client behind reads most of it in the first token's read),
  and the server gave no timing of its own: the request has no decode rate at all, and the arm's
  rate rests on the others.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.analysis.metrics import (
    BUNCH_SHARE,
    BUNCH_TTFT_SHARE,
    CLIENT_SERVER_TOLERANCE,
    LEAD_BURST_SHARE,
)


class Code(StrEnum):
    CACHED_PREFILL = "CACHED_PREFILL"
    CLIENT_SERVER_DISAGREE = "CLIENT_SERVER_DISAGREE"
    UNTIMED_DECODE = "UNTIMED_DECODE"


SEVERITY = {
    Code.CACHED_PREFILL: Severity.WARNING,
    Code.CLIENT_SERVER_DISAGREE: Severity.WARNING,
    Code.UNTIMED_DECODE: Severity.WARNING,
}
ANCHOR = "measurement"

CACHED_SHARE = 0.5  # more than this share of a cold request's prompt from the cache is a finding
#: Categories built to hit the cache (cache-reuse suite) or to share a prefix by design (agents).
WARM_BY_DESIGN = ("cache-", "agent-")


def check(ev: RunEvidence) -> list[Finding]:
    """What the records and cells say about the measurement itself: cache, client vs server."""
    run, arms = ev.run, ev.run.measured_arms
    return (
        cached_prefill(run.df, arms, run.cells)
        + client_server_disagreement(run.df, arms)
        + untimed_decode(run.df, arms)
    )


def cached_prefill(
    df: pd.DataFrame, arms: Sequence[str], cells: Sequence[Mapping[str, Any]] = ()
) -> list[Finding]:
    """CACHED_PREFILL per arm whose cold requests took most of their prompt from the cache. A
    prefix every prompt shares because the chat template writes it (a fixed system prompt: 24
    tokens on SmolLM2) is cached by any server and is no broken cold-prompt design (issue 44):
    where every cold request took at least ``k`` tokens from the cache and the prompts as the
    server rendered them (``cells``) share a common start, the check reads the requests past
    those ``k`` tokens, and says where the shared prefix is (info)."""
    out = []
    template = shared_start(cells)
    for arm in arms:
        sub = df[(df["arm"] == arm) & df["cached_tokens"].notna() & (df["prompt_tokens"] > 0)]
        cold = sub[~sub["category"].fillna("").astype(str).str.startswith(WARM_BY_DESIGN)]
        shared = float(cold["cached_tokens"].min()) if len(cold) >= 2 and template else 0.0
        cached, prompt = cold["cached_tokens"] - shared, cold["prompt_tokens"] - shared
        hot = cold[(prompt > 0) & (cached > CACHED_SHARE * prompt)]
        if len(hot):
            out.append(_cached(arm, hot, len(cold), shared))
        # Said only where it matters: where the prefix alone would have read as a cache hit.
        naive = cold["cached_tokens"] > CACHED_SHARE * cold["prompt_tokens"]
        if shared > 0 and bool(naive.sum() > len(hot)):
            out.append(_template_prefix(arm, shared, template, len(cold)))
    return out


def _cached(arm: str, hot: pd.DataFrame, cold: int, shared: float) -> Finding:
    share = (hot["cached_tokens"] - shared) / (hot["prompt_tokens"] - shared)
    worst = hot.iloc[int(np.argmax(share.to_numpy()))]
    past = f" past the {shared:.0f}-token prefix every prompt shares" if shared else ""
    return Finding(
        Code.CACHED_PREFILL,
        (arm,),
        f"{arm}: {len(hot)} of {cold} requests meant to be cold took more than "
        f"{CACHED_SHARE:.0%} of their prompt{past} from the cache (e.g. {worst['prompt_id']}: "
        f"{worst['cached_tokens']:.0f} of {worst['prompt_tokens']:.0f} tokens cached); their "
        "TTFT and prefill are cache hits, not prefills.",
    )


def _template_prefix(arm: str, shared: float, template: str, cold: int) -> Finding:
    shown = template if len(template) <= 60 else template[:57] + "…"
    return Finding(
        Code.CACHED_PREFILL,
        (arm,),
        f"{arm}: all {cold} cold requests took their first {shared:.0f} prompt tokens from the cache: "
        f"the prompts as the server renders them all start {shown!r} — a prefix the chat template "
        "writes, which any server caches after the first request. TTFT excludes it; the cold-prompt "
        "check reads each request past it.",
        Severity.INFO,
    )


def shared_start(cells: Sequence[Mapping[str, Any]]) -> str:
    """The start every prompt the server rendered shares (cells' ``rendered_prompts``), "" with
    fewer than two distinct prompts or no common start."""
    texts = {
        str(p.get("text") or "")
        for cell in cells
        for p in cell.get("rendered_prompts") or []
        if isinstance(p, Mapping)
    }
    texts.discard("")
    # character by character is the point here: texts, not paths
    return os.path.commonprefix(sorted(texts)) if len(texts) >= 2 else ""  # noqa: RUF071


def client_server_disagreement(df: pd.DataFrame, arms: Sequence[str]) -> list[Finding]:
    out = []
    for arm in arms:
        sub = df[(df["arm"] == arm) & df["decode_disagrees"].notna()]
        bad = sub[sub["decode_disagrees"] == 1.0]
        if len(bad):
            client = 1000.0 / bad["tpot_ms"]  # the client's own window, even where it came bunched
            ratio = (client / bad["server_decode_tok_s"]).to_numpy(dtype=float)
            at = int(np.argmax(np.abs(np.log(ratio))))
            worst = bad.iloc[at]
            out.append(
                Finding(
                    Code.CLIENT_SERVER_DISAGREE,
                    (arm,),
                    f"{arm}: on {len(bad)} of {len(sub)} requests the client's decode rate differs from "
                    f"the server's own by more than {CLIENT_SERVER_TOLERANCE:.0%} (e.g. "
                    f"{worst['prompt_id']}: client {client.iloc[at]:.1f} vs server "
                    f"{worst['server_decode_tok_s']:.1f} tok/s); the summary uses the server's rate there.",
                )
            )
    return out


def untimed_decode(df: pd.DataFrame, arms: Sequence[str]) -> list[Finding]:
    """Requests of several tokens whose chunks came bunched (:func:`~specbench.analysis.metrics.bunched`:
    the first token's read held most of the stream, or nearly all of it came within a sliver of the
    TTFT) and whose server timed nothing either, so their decode rate is NaN instead of a number."""
    out = []
    for arm in arms:
        sub = df[(df["arm"] == arm) & (df["output_tokens"] > 1)]
        lost = sub[(sub["bunched"] == 1.0) & sub["decode_tok_s"].isna()]
        if len(lost):
            out.append(
                Finding(
                    Code.UNTIMED_DECODE,
                    (arm,),
                    f"{arm}: {len(lost)} of {len(sub)} requests reached the client bunched (the read "
                    f"that stamped the first token held {LEAD_BURST_SHARE:.0%} or more of the token "
                    f"chunks, or {BUNCH_SHARE:.0%} of them came within {BUNCH_TTFT_SHARE:.0%} of the "
                    f"TTFT, e.g. {lost.iloc[0]['prompt_id']}) and the server "
                    "timed none of them: they have no decode rate, and the arm's rests on the other "
                    f"{len(sub) - len(lost)}. vLLM: start it with --enable-per-request-metrics so its "
                    "own timing stands in.",
                )
            )
    return out


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
