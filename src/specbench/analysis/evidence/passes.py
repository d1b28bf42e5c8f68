"""Verification passes counted in a one-token-per-chunk stream (llama.cpp): does the client's own
stream confirm a 100 % acceptance?

llama.cpp sends each token as its own chunk, so tokens per chunk says nothing about speculation.
But after a verification pass the server sends that pass's accepted drafts + 1 back to back
(microseconds apart), and between passes lies at least one target step (≥ 0.2 ms on a GPU, more on
a CPU). So the stream's bursts are the passes: the prefill token, then one burst per pass, each of
accepted + 1 tokens — ``output − accepted`` bursts in all by the counters. A counter that over-counts
accepted tokens implies fewer passes than the stream shows.

Bursts are :mod:`specbench.analysis.evidence.stalls`' read windows (chunks closer than ``BURST_GAP_MS``, or
a tenth of the mean gap if longer, came in one burst of reads). Those split a pass now and then:
on an H200 a pass's tokens were read up to 0.15 ms apart, and on a busy 2-core box up to 4.5 ms
apart where the passes themselves took 15–25 ms. So a window starts a pass only when the gap before
it is at least ``PASS_SHARE`` of the typical pass gap: the median of the P longest gaps, P being the
pass boundaries the counters imply. If the counters are right, those are the passes and every other
gap is far shorter; if they over-count, the stream has more gaps as long as those and they count.
Measured (bursts vs ``output − accepted`` per request, draft-model and n-gram arms at 34–100 %
acceptance): an H200 dense and MoE run and a cliff run, every request exact but one (+1); four CPU
lab runs, per arm Σ bursts / Σ (output − accepted) 0.97–1.02 (−5..+1 per request on a MoE run whose
client fell behind: CLIENT_BEHIND, where the check says the stream cannot tell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from specbench.analysis import metrics
from specbench.analysis.evidence.lag import lagging
from specbench.analysis.evidence.stalls import stream
from specbench.store.record import Record

# A window starts a pass when the gap before it is this share of the typical pass gap: on the H200
# runs 0.25–0.33 counted every drafting request within +1, 0.2 within +2; 0.5 merged real passes.
PASS_SHARE = 0.25
# Σ stream passes / Σ passes the counters imply, over the arm's drafting requests: within this of
# 1 confirms (measured 0.97–1.02 on genuine streams); above 1 + CONTRADICTS it contradicts them
# (counters set to accepted == drafted on real n-gram and draft arms of 72–80 % acceptance: 1.57–5.7).
AGREES = 0.10
CONTRADICTS = 0.25
MIN_REQUESTS = 3  # as ACCEPTANCE_ARTEFACT itself: fewer requests tell nothing


class Passes(NamedTuple):
    """What the arm's drafting requests' streams show: passes counted, passes the counters imply
    (output − accepted, the prefill token's burst included), tokens, and the requests the stream
    could not time (bunched) or all of them (the client fell behind: CLIENT_BEHIND)."""

    shown: int
    implied: int
    tokens: int
    counted: int
    bunched: int
    behind: bool


def request_passes(rec: Record) -> tuple[int, int] | None:
    """(passes the stream shows, passes the counters imply) of one request, both counting the
    prefill token's burst; None without a timed stream or the server's draft counts."""
    found = stream(rec)
    n, accepted = metrics.output_tokens(rec), metrics.draft_accepted(rec)
    if found is None or not (np.isfinite(n) and np.isfinite(accepted)):
        return None
    implied = int(n - accepted)
    first = float(n - found.gap_tokens.sum())  # tokens of the first read window (the prefill's)
    gaps = found.gap_ms[found.gap_tokens > 0]  # a window of the finish chunk alone is no pass
    if implied > 1 and gaps.size:
        typical = float(np.median(np.sort(gaps)[::-1][: implied - 1]))
        gaps = gaps[gaps >= PASS_SHARE * typical]
    return int(first > 0) + int(gaps.size), implied


def arm_passes(
    arm: str, records: Sequence[Record], cells: Sequence[Mapping[str, Any]], df: pd.DataFrame
) -> Passes:
    """:class:`Passes` over the arm's measured drafting requests."""
    shown = implied = tokens = counted = bunched = 0
    for rec in _drafting(arm, records):
        if metrics.bunched(rec) == 1.0:
            bunched += 1  # read in one burst: its passes merged, it can confirm nothing
            continue
        found = request_passes(rec)
        if found is None:
            continue
        shown, implied = shown + found[0], implied + found[1]
        tokens += int(metrics.output_tokens(rec))
        counted += 1
    behind = bool(lagging([c for c in cells if c.get("arm") == arm], df))
    return Passes(shown, implied, tokens, counted, bunched, behind)


def _drafting(arm: str, records: Sequence[Record]) -> list[Record]:
    measured = [r for r in records if r.arm == arm and r.measured]
    return [r for r in measured if metrics.draft_n(r) > 0]


def verdict(p: Passes) -> tuple[str, str]:
    """("confirms" | "contradicts" | "unknown", the sentence for the finding's evidence)."""
    seen = (
        f"the stream shows {p.shown} passes for {p.tokens} tokens over {p.counted} drafting requests, "
        f"the counters imply {p.implied} (output − accepted, the prefill token's burst counted as one; "
        "llama.cpp sends a pass's accepted tokens + 1 back to back, one chunk each)"
        + (f"; {p.bunched} request(s) read in one burst left out" if p.bunched else "")
    )
    if p.behind:
        return "unknown", "the stream cannot tell: the client's event loop fell behind on this arm " + (
            "(CLIENT_BEHIND), so one read may hold several passes — check the drafter's own counters."
        )
    if p.counted < MIN_REQUESTS or p.implied <= 0:
        late = f", {p.bunched} reached the client bunched" if p.bunched else ""
        return "unknown", (
            f"the stream cannot tell: {p.counted} drafting request(s) with a timed stream{late} "
            f"(≥ {MIN_REQUESTS} needed) — check the drafter's own counters."
        )
    ratio = p.shown / p.implied
    if abs(ratio - 1.0) <= AGREES:
        return "confirms", f"here the stream confirms it: {seen}."
    if ratio > 1.0 + CONTRADICTS:
        return "contradicts", (
            f"the stream contradicts the counters: {seen}; more passes than counted means fewer "
            "tokens accepted per pass — check the drafter's own counters."
        )
    why = "fewer passes than implied: the client read several at once" if ratio < 1.0 else "too close to call"
    return "unknown", f"the stream cannot tell: {seen}; {why} — check the drafter's own counters."


def one_token_per_chunk(drafting: pd.DataFrame) -> bool:
    """Every drafting request streamed one token per chunk (llama.cpp), so only bursts can show
    its passes."""
    if "tokens_per_chunk" not in drafting.columns:
        return False
    per = drafting["tokens_per_chunk"].to_numpy(np.float64)
    return bool(per.size) and bool(np.all(np.isfinite(per) & (per <= 1.0)))
