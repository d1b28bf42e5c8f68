"""The prompt as the server rendered it with its chat template, one request per category.

Each arm's first launch keeps the rendering in its cell (``rendered_prompts``,
:mod:`specbench.workloads.rendered`); the report shows the baseline's and names any arm whose
server rendered the same request differently (an arm flag that changes the template changes
what is measured).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from specbench.analysis.run import RunData

COLUMNS = ["workload", "category", "prompt_id", "arm", "via", "text", "differs_in"]


def _by_arm(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Arm → its first non-empty list of rendered samples, in the matrix's arm order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for cell in run.cells:
        found = cell.get("rendered_prompts")
        if isinstance(found, list) and found and cell.get("arm") not in out:
            out[str(cell.get("arm"))] = [s for s in found if isinstance(s, dict) and "text" in s]
    order = {a: i for i, a in enumerate([run.baseline, *run.arms])}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def rendered_prompts(run: RunData) -> pd.DataFrame:
    """One row per (workload, category): the rendered prompt of the baseline (else the first arm
    that has one), with the arms whose server rendered that request to other text."""
    by_arm = _by_arm(run)
    if not by_arm:
        return pd.DataFrame(columns=COLUMNS)
    shown, samples = next(iter(by_arm.items()))
    rows = []
    for s in samples:
        others = [
            arm
            for arm, found in by_arm.items()
            if arm != shown
            and any(o.get("prompt_id") == s.get("prompt_id") and o["text"] != s["text"] for o in found)
        ]
        rows.append({
            "workload": s.get("workload"), "category": s.get("category"), "prompt_id": s.get("prompt_id"),
            "arm": shown, "via": s.get("via", ""), "text": s["text"], "differs_in": others,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)
