"""Did the client keep up? CLIENT_BEHIND (its event loop woke late: the arm's timing figures are
partly the client's) and LATE_SENDS (an open-loop schedule ran late: the offered load was lower
than asked), so a harness-bound run can never pass for an engine result.

How late the loop woke, and when that counts, is :mod:`specbench.analysis.evidence.lag`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.evidence.lag import Lag, lagging
from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.store.record import Record


class Code(StrEnum):
    CLIENT_BEHIND = "CLIENT_BEHIND"
    LATE_SENDS = "LATE_SENDS"


SEVERITY = {Code.CLIENT_BEHIND: Severity.WARNING, Code.LATE_SENDS: Severity.WARNING}
ANCHOR = "client"


def check(ev: RunEvidence) -> list[Finding]:
    run = ev.run
    return client_lag_findings(run.cells, run.df) + schedule_findings(run.records)


def client_lag_findings(cells: Sequence[Mapping[str, Any]], df: pd.DataFrame) -> list[Finding]:
    """CLIENT_BEHIND per arm whose client fell behind (:func:`~specbench.analysis.evidence.lag.lagging`)."""
    return [_behind(lag, df) for lag in lagging(cells, df)]


def _behind(lag: Lag, df: pd.DataFrame) -> Finding:
    arm, worst, tpot = lag.arm, lag.worst, lag.tpot_ms
    tpot_text = f"{tpot:.2f} ms" if np.isfinite(tpot) else "unknown"
    return Finding(
        Code.CLIENT_BEHIND,
        (arm,),
        f"{arm}: the client's event loop woke {worst['p99_ms']:.2f} ms late at p99 (max "
        f"{worst['max_ms']:.1f} ms, repeat {worst['repeat']}) against a median TPOT of {tpot_text}: "
        f"{_stamps_text(worst)}, so {_measures(df, arm)} partly measure the client"
        f"{_untimed_text(df, arm)} (lower the concurrency, or give the client its own cores).",
        SEVERITY[Code.CLIENT_BEHIND],
    )


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


def schedule_findings(records: Sequence[Record]) -> list[Finding]:
    """LATE_SENDS per arm whose open-loop sends (records with ``lateness_ms``) ran late at p99:
    the load offered was not the load asked for. The evidence splits waiting for a free slot
    under the concurrency cap (the server was slower than the rate) from the client's own delay."""
    by_arm: dict[str, list[Record]] = {}
    for rec in records:
        if rec.lateness_ms is not None and not rec.warmup:
            by_arm.setdefault(rec.arm, []).append(rec)
    out = []
    for arm, recs in sorted(by_arm.items()):
        late = np.array([r.lateness_ms for r in recs], dtype=float)
        cap = np.array([r.cap_wait_ms or 0.0 for r in recs], dtype=float)
        p99 = float(np.percentile(late, 99))
        if p99 <= LATE_FLOOR_MS:
            continue
        # A rate sweep asks several rates: name them all, not the first phase's.
        asked = sorted({float(r.arrival["rate"]) for r in recs if r.arrival and r.arrival.get("rate")})
        asked_text = f" against {', '.join(f'{v:g}' for v in asked)}/s asked" if asked else ""
        out.append(
            Finding(
                Code.LATE_SENDS,
                (arm,),
                f"{arm}: open-loop sends ran {p99:.1f} ms late at p99 over {len(recs)} requests "
                f"({float(np.percentile(cap, 99)):.1f} ms of it waiting for a free slot under the "
                f"concurrency cap, {float(np.percentile(late - cap, 99)):.1f} ms the client's own delay)"
                f"{asked_text}: the offered load was lower than the schedule.",
            )
        )
    return out


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
