"""The "Tune" section of a tune run's report: the candidates, when and why each was dropped,
predicted vs measured, and the response surface on the numeric dimensions.

A tune writes ``DIR/tune.json`` and one run directory per workload (``DIR/<workload>``); this
section appears in the report of such a run directory and is absent from every other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from specbench.matrix.tuneblock import NUMERIC
from specbench.report.page.document import Block, Bullets, Figure, Heading, Para, Table


def tune_entry(run_dir: Path) -> dict[str, Any] | None:
    """This run directory's workload entry of the tune.json beside it (None: not a tune run)."""
    path = run_dir.parent / "tune.json"
    try:
        log = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = (log.get("workloads") or {}).get(run_dir.name)
    return entry if isinstance(entry, dict) and "candidates" in entry else None


def tune_blocks(run_dir: Path) -> list[Block]:
    entry = tune_entry(run_dir)
    if entry is None:
        return []
    state, ans = entry.get("state", {}), entry.get("answer", {})
    stopped = f"Stopped after {state.get('rounds', 0)} rounds: {state.get('stop_reason')}."
    blocks: list[Block] = [
        Heading("Tune"),
        Para(f"{ans.get('text', '')}. {stopped}"),
        Para(f"Order: {state.get('order_reason', '')}. Predicted: the theory's speedup before any launch."),
        Table(candidate_frame(entry["candidates"]), "candidates: predicted vs measured, why each stopped"),
    ]
    events = [_event_text(e) for e in state.get("events", []) if e.get("event") in ("refine", "no_refine")]
    if events:
        blocks.append(Bullets(tuple(events)))
    surface = surface_plot(entry["candidates"], run_dir / "report" / "plots" / "tune-surface.png")
    if surface is not None:
        blocks.append(Figure(surface, "Response surface", "measured speedup over the numeric dimensions"))
    return blocks


def _event_text(e: dict[str, Any]) -> str:
    if e["event"] == "refine":
        return f"round {e['round']}: refined around {e['leader']}: {', '.join(e['added'])}"
    return f"round {e['round']}: no refinement: {e['why']}"


def candidate_frame(candidates: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for c in candidates:
        m = c.get("measured") or {}
        rows.append({
            "candidate": c["name"],
            "predicted ×": f"{c['predicted']:.2f}" if c.get("predicted") is not None else "—",
            "measured ×": f"{m['ratio']:.3f}" if m else "—",
            "CI": f"{m['ci_low']:.3f}–{m['ci_high']:.3f}" if m else "",
            "verdict": m.get("verdict", ""),
            "status": c["status"] if c["status"] != "dropped" else f"dropped @{c['dropped_round']}",
            "why": c.get("reason", ""),
        })  # fmt: skip
    return pd.DataFrame(rows)


def surface_plot(candidates: list[dict[str, Any]], path: Path) -> Path | None:
    """Measured speedup against the first numeric dimension, one line per value of the second
    (None when no numeric dimension varies or nothing was measured)."""
    measured = [c for c in candidates if c.get("measured")]
    dims = [d for d in NUMERIC if len({c["values"].get(d) for c in measured} - {None}) > 1]
    if not dims:
        return None
    x, group = dims[0], dims[1] if len(dims) > 1 else None
    fig = MplFigure(figsize=(6, 3.6), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    keys = sorted({c["values"].get(group) for c in measured}, key=str) if group else [None]
    for key in keys:
        mine = [c for c in measured if c["values"].get(group) == key]
        pts = sorted(((float(c["values"][x]), c["measured"]) for c in mine), key=lambda p: p[0])
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1]["ratio"] for p in pts], marker="o", label=f"{group} {key}" if group else None)
        ax.fill_between(xs, [p[1]["ci_low"] for p in pts], [p[1]["ci_high"] for p in pts], alpha=0.12)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel(x)
    ax.set_ylabel("speedup over baseline")
    if group:
        ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
