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

from collections.abc import Sequence

import numpy as np
import pandas as pd

from specbench.analysis.finding import Finding
from specbench.analysis.metrics import (
    BUNCH_SHARE,
    BUNCH_TTFT_SHARE,
    CLIENT_SERVER_TOLERANCE,
    LEAD_BURST_SHARE,
)

CACHED_SHARE = 0.5  # more than this share of a cold request's prompt from the cache is a finding
#: Categories built to hit the cache (cache-reuse suite) or to share a prefix by design (agents).
WARM_BY_DESIGN = ("cache-", "agent-")


def cached_prefill(df: pd.DataFrame, arms: Sequence[str]) -> list[Finding]:
    out = []
    for arm in arms:
        sub = df[(df["arm"] == arm) & df["cached_tokens"].notna() & (df["prompt_tokens"] > 0)]
        cold = sub[~sub["category"].fillna("").astype(str).str.startswith(WARM_BY_DESIGN)]
        hot = cold[cold["cached_tokens"] > CACHED_SHARE * cold["prompt_tokens"]]
        if len(hot):
            worst = hot.iloc[int(np.argmax((hot["cached_tokens"] / hot["prompt_tokens"]).to_numpy()))]
            out.append(
                Finding(
                    "CACHED_PREFILL",
                    (arm,),
                    f"{arm}: {len(hot)} of {len(cold)} requests meant to be cold took more than "
                    f"{CACHED_SHARE:.0%} of their prompt from the cache (e.g. {worst['prompt_id']}: "
                    f"{worst['cached_tokens']:.0f} of {worst['prompt_tokens']:.0f} tokens cached); their "
                    "TTFT and prefill are cache hits, not prefills.",
                )
            )
    return out


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
                    "CLIENT_SERVER_DISAGREE",
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
                    "UNTIMED_DECODE",
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
