"""The client's own lag, so a harness-bound run can never pass for an engine result.

While a cell's requests stream, :class:`LoopLag` sleeps a fixed period on the same event loop
and records how late each wake-up came. A loop that wakes late stamps chunks late too: when it
falls behind, queued chunks drain in a burst, gaps shrink towards zero and TTFT grows — the
figures then describe the client, not the server. :func:`client_lag_findings` turns the lag kept
in each cell into a CLIENT_BEHIND finding when it is large next to the arm's time per output token
(TPOT, not the median ITL: a server that sends in bursts has a median ITL near zero).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.finding import Finding

LAG_FLOOR_MS = 2.0  # below this, lag is timer and scheduler noise on a shared machine
LAG_SHARE = 0.5  # poll stamps: lag p99 above half the arm's median TPOT distorts per-token timing
# Kernel receive stamps are right however late the loop reads; only a read later than the gap to
# the next chunk takes two chunks at once (one stamp). The median TPOT bounds that gap from below.
LAG_SHARE_KERNEL = 1.0


def client_lag_findings(cells: list[dict[str, Any]], df: pd.DataFrame) -> list[Finding]:
    """CLIENT_BEHIND per arm whose worst cell's loop-lag p99 is both above the noise floor and a
    sizeable share of the arm's median TPOT (its timing figures are partly the client's): half of
    it with poll stamps, all of it with the kernel's receive stamps."""
    worst: dict[str, dict[str, Any]] = {}
    for cell in cells:
        lag = cell.get("client_lag") or {}
        if lag.get("p99_ms") is not None and lag["p99_ms"] > worst.get(cell["arm"], {}).get("p99_ms", -1):
            worst[cell["arm"]] = {**lag, "repeat": cell.get("repeat")}
    out = []
    for arm, lag in sorted(worst.items()):
        tpot = df.loc[df["arm"] == arm, "tpot_ms"].median() if "tpot_ms" in df and not df.empty else np.nan
        share = LAG_SHARE_KERNEL if lag.get("stamps") == "kernel" else LAG_SHARE
        limit = max(LAG_FLOOR_MS, share * tpot) if np.isfinite(tpot) else LAG_FLOOR_MS
        if lag["p99_ms"] > limit:
            tpot_text = f"{tpot:.2f} ms" if np.isfinite(tpot) else "unknown"
            out.append(
                Finding(
                    "CLIENT_BEHIND",
                    (arm,),
                    f"{arm}: the client's event loop woke {lag['p99_ms']:.2f} ms late at p99 (max "
                    f"{lag['max_ms']:.1f} ms, repeat {lag['repeat']}) against a median TPOT of {tpot_text}: "
                    f"{_stamps_text(lag)}, so {_measures(df, arm)} partly measure the client"
                    f"{_untimed_text(df, arm)} (lower the concurrency, or give the client its own cores).",
                )
            )
    return out


def _stamps_text(lag: dict[str, Any]) -> str:
    """How a late loop distorts the stamps: with the kernel's receive times (``stamps`` in the
    cell's lag, readstamps.py) a read is timed right, but one that waited took several chunks that
    then share the last one's arrival; with poll stamps the stamps themselves came late."""
    if lag.get("stamps") == "kernel":
        return "reads after a late wake-up took several chunks at once, which share the last one's arrival"
    return "chunk stamps were late and bunched"


def _measures(df: pd.DataFrame, arm: str) -> str:
    """What the late stamps distort: TTFT and ITL always; the decode rate too where the server
    times no request of the arm itself (vLLM, SGLang), so no server rate can stand in for a
    bunched stream (a vLLM ngram request read 5279 tok/s where its repeats read 1693 and 2226)."""
    server = df.loc[df["arm"] == arm, "server_decode_tok_s"] if "server_decode_tok_s" in df else None
    if server is None or server.isna().all():
        return "TTFT, ITL and decode tok/s (the server times no request itself)"
    return "TTFT/ITL"


def _untimed_text(df: pd.DataFrame, arm: str) -> str:
    """Requests whose every token chunk the late loop read at once: with no server timing to stand
    in, they have no decode rate and silently leave the arm's decode figures and pairs."""
    if not {"bunched", "decode_tok_s"} <= set(df.columns):
        return ""
    mine = df[df["arm"] == arm]
    n = int(((mine["bunched"] == 1.0) & mine["decode_tok_s"].isna()).sum())
    if not n:
        return ""
    return (
        f"; {n} of {len(mine)} requests arrived bunched and have no decode rate "
        "(left out of its decode figures)"
    )


LATE_FLOOR_MS = 10.0  # sends later than this at p99 mean the schedule was not kept


def schedule_findings(records: list[dict[str, Any]]) -> list[Finding]:
    """LATE_SENDS per arm whose open-loop sends (records with ``lateness_ms``) ran late at p99:
    the load offered was not the load asked for. The evidence splits waiting for a free slot
    under the concurrency cap (the server was slower than the rate) from the client's own delay."""
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("lateness_ms") is not None and not rec.get("warmup"):
            by_arm.setdefault(rec["arm"], []).append(rec)
    out = []
    for arm, recs in sorted(by_arm.items()):
        late = np.array([r["lateness_ms"] for r in recs], dtype=float)
        cap = np.array([r.get("cap_wait_ms") or 0.0 for r in recs], dtype=float)
        p99 = float(np.percentile(late, 99))
        if p99 <= LATE_FLOOR_MS:
            continue
        # A rate sweep asks several rates: name them all, not the first phase's.
        asked = sorted({float(r["arrival"]["rate"]) for r in recs if (r.get("arrival") or {}).get("rate")})
        asked_text = f" against {', '.join(f'{v:g}' for v in asked)}/s asked" if asked else ""
        out.append(
            Finding(
                "LATE_SENDS",
                (arm,),
                f"{arm}: open-loop sends ran {p99:.1f} ms late at p99 over {len(recs)} requests "
                f"({float(np.percentile(cap, 99)):.1f} ms of it waiting for a free slot under the "
                f"concurrency cap, {float(np.percentile(late - cap, 99)):.1f} ms the client's own delay)"
                f"{asked_text}: the offered load was lower than the schedule.",
            )
        )
    return out
