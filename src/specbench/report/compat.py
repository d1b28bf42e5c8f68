"""Whether two run directories measured the same thing: what ``merge`` and ``compare`` check
before pooling or setting numbers side by side.

``merge`` pools records into one dataset, so runs whose prompts, workloads, arm arguments or
engine version differ would average different things under one name: refused unless
``--force``, each difference named (the model file and the engine commit are checked by
:func:`specbench.report.merge.merge_runs` itself). Different engine build options (a CUDA build
on one machine, a CPU build on the other) are what merging several machines is for: a warning,
recorded in the merged manifest. ``compare`` sets two runs side by side: it shows the findings
of each and flags a baseline whose rate moved between them (a busy machine, another engine),
because every absolute rate of that comparison then measures the move, not the setting.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.analysis.sequential import matrix_alpha
from specbench.errors import StoreError
from specbench.store.rundir import RunStore

MOVED_HINT = 0.05  # an undetermined baseline change larger than this is still worth a line
_SHOWN = 4  # prompt ids named in a difference before "…"


@dataclass(frozen=True)
class Difference:
    """One way run ``b`` differs from run ``a``; ``refuse``: merging them would pool unlike data."""

    what: str
    refuse: bool = True


def _read(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    store = RunStore(root)
    return store.manifest(), store.env()


def _prompt_map(manifest: dict[str, Any], root: Path) -> dict[str, str]:
    """prompt id → a hash of what was sent (manifest ``prompts``); a run without them (imported,
    older): its records' prompt ids, with no text to compare."""
    prompts = manifest.get("prompts")
    if isinstance(prompts, list) and prompts:
        out = {}
        for p in prompts:
            if isinstance(p, dict) and "prompt_id" in p:
                sent = {k: p.get(k) for k in ("messages", "max_tokens", "tools", "target_tokens")}
                out[str(p["prompt_id"])] = hashlib.sha256(
                    json.dumps(sent, sort_keys=True).encode()
                ).hexdigest()
        return out
    ids = {str(r.prompt_id) for r in RunStore(root).typed_records() if not r.warmup}
    return dict.fromkeys(ids - {"None"}, "")


def _names(ids: Sequence[str]) -> str:
    shown = ", ".join(sorted(ids)[:_SHOWN])
    return shown + (f", … ({len(ids)} in all)" if len(ids) > _SHOWN else "")


def prompt_differences(a: Path, b: Path, ma: dict[str, Any], mb: dict[str, Any]) -> list[Difference]:
    pa, pb = _prompt_map(ma, a), _prompt_map(mb, b)
    out = []
    only_a, only_b = [k for k in pa if k not in pb], [k for k in pb if k not in pa]
    if only_a or only_b:
        out.append(Difference(
            f"prompts differ: {len(only_a)} only in {a} ({_names(only_a) or '-'}), "
            f"{len(only_b)} only in {b} ({_names(only_b) or '-'})"
        ))  # fmt: skip
    changed = [k for k in pa if k in pb and pa[k] and pb[k] and pa[k] != pb[k]]
    if changed:
        out.append(
            Difference(f"prompts differ: {len(changed)} with the same id but other text ({_names(changed)})")
        )
    return out


def _workloads(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    matrix = manifest.get("matrix") or {}
    several = matrix.get("workloads") or []
    listed = several if several else [matrix.get("workload") or {}]
    return [w for w in listed if isinstance(w, dict)]


def workload_differences(ma: dict[str, Any], mb: dict[str, Any]) -> list[Difference]:
    """Field by field; ``prompt_file`` only where the prompts themselves were not recorded (the
    same file at another path on another machine is the same workload)."""
    wa, wb = _workloads(ma), _workloads(mb)
    texts = bool(ma.get("prompts")) and bool(mb.get("prompts"))
    if len(wa) != len(wb):
        return [Difference(f"workloads differ: {len(wa)} vs {len(wb)} workloads")]
    out = []
    for i, (x, y) in enumerate(zip(wa, wb, strict=True)):
        where = "workload" if len(wa) == 1 else f"workloads[{i}]"
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key) and not (texts and key == "prompt_file"):
                out.append(Difference(f"{where}.{key} differs: {x.get(key)!r} vs {y.get(key)!r}"))
    return out


def arm_differences(ma: dict[str, Any], mb: dict[str, Any]) -> list[Difference]:
    """Arms of one name pooled from both runs must have been served alike."""
    xa, xb = ma.get("matrix") or {}, mb.get("matrix") or {}
    out = []
    if xa.get("common_args") != xb.get("common_args"):
        out.append(Difference(f"common_args differ: {xa.get('common_args')} vs {xb.get('common_args')}"))
    arms_a, arms_b = xa.get("arms") or {}, xb.get("arms") or {}
    for arm in [k for k in arms_a if k in arms_b and arms_a[k] != arms_b[k]]:
        out.append(Difference(f"arm {arm}'s arguments differ: {arms_a[arm]} vs {arms_b[arm]}"))
    return out


def alpha_differences(ma: dict[str, Any], mb: dict[str, Any]) -> list[Difference]:
    """The verdicts' α (the matrix's ``alpha``; 0.05 where a run predates it): a merged run is
    judged at one level, which would otherwise be the first run's."""
    aa, ab = matrix_alpha(ma), matrix_alpha(mb)
    if aa != ab:
        return [Difference(f"alpha differs: {aa} vs {ab} (the verdicts' chance of a false one)")]
    return []


def engine_differences(ea: dict[str, Any], eb: dict[str, Any]) -> list[Difference]:
    """The engine's kind and version refuse; its build options warn (the commit: merge_runs)."""
    xa, xb = ea.get("engine") or {}, eb.get("engine") or {}
    if not isinstance(xa, dict) or not isinstance(xb, dict):
        return []
    out = [
        Difference(f"engine {key} differs: {xa.get(key)} vs {xb.get(key)}")
        for key in ("kind", "version", "build_number")
        if xa.get(key) is not None and xb.get(key) is not None and xa.get(key) != xb.get(key)
    ]
    ba, bb = xa.get("build") or {}, xb.get("build") or {}
    if isinstance(ba, dict) and isinstance(bb, dict) and ba and bb:
        for key in sorted(k for k in set(ba) | set(bb) if ba.get(k) != bb.get(k)):
            out.append(
                Difference(f"engine build {key} differs: {ba.get(key)} vs {bb.get(key)}", refuse=False)
            )
    return out


def differences(a: Path, b: Path) -> list[Difference]:
    """Every way run ``b`` differs from run ``a`` in what it measured (empty: alike)."""
    (ma, ea), (mb, eb) = _read(a), _read(b)
    return [
        *prompt_differences(a, b, ma, mb),
        *workload_differences(ma, mb),
        *arm_differences(ma, mb),
        *alpha_differences(ma, mb),
        *engine_differences(ea, eb),
    ]


def merge_checked(runs: Sequence[Path], out: Path, force: bool = False) -> tuple[Path, list[str]]:
    """:func:`~specbench.report.merge.merge_runs` after checking that the runs measured the same
    prompts, workloads, arms and engine version as the first: refuses (StoreError, exit 5)
    naming every difference unless ``force``. Returns the merged directory and the lines to warn
    with (differences pooled despite, build options); both are kept in its manifest."""
    from specbench.report import merge_runs

    found = [(Path(r), d) for r in runs[1:] for d in differences(Path(runs[0]), Path(r))] if runs else []
    refused = [f"{d.what} ({runs[0]} vs {r})" for r, d in found if d.refuse]
    if refused and not force:
        raise StoreError(f"refusing to pool runs: {'; '.join(refused)}; pass --force to merge anyway")
    merged = merge_runs(runs, out, force=force)
    warned = [f"{d.what} ({runs[0]} vs {r})" for r, d in found if not d.refuse]
    if refused or warned:
        store = RunStore(merged)
        pooled = list(store.manifest().get("pooled_despite") or [])
        store.update_manifest(pooled_despite=pooled + refused, merge_warnings=warned)
    return merged, [f"pooled despite: {line}" for line in refused] + [f"warning: {line}" for line in warned]


def baseline_moved(df: pd.DataFrame, baseline: str) -> str | None:
    """A line when the baseline's own rate changed between the runs (``df``: compare_runs')."""
    rows = df[df["arm"] == baseline]
    if rows.empty or pd.isna(rows.iloc[0]["median_a"]) or pd.isna(rows.iloc[0]["median_b"]):
        return None
    r = rows.iloc[0]
    verdict = str(r["verdict"])
    who = "the baseline" if baseline == "baseline" else f"the baseline {baseline}"
    rates = f"{r['median_a']:.1f} → {r['median_b']:.1f}"
    ratio = r["median_b"] / r["median_a"] if r["median_a"] else float("nan")
    if verdict.startswith(("faster", "slower")):
        interval = (
            f"×{r['ratio']:.3f}, 95 % CI {r['ci_low']:.3f}–{r['ci_high']:.3f}" if pd.notna(r["ratio"]) else ""
        )
        return (
            f"WARNING: {who} moved: {rates} {df.attrs.get('metric', 'decode_tok_s')} "
            f"({interval}, {verdict}): the machine, its load or the engine changed between the runs; "
            "the 'b vs a' rates measure that move, the speedup columns (each arm over its own run's "
            "baseline) are the comparison of settings"
        )
    if abs(ratio - 1) > MOVED_HINT:
        return (
            f"note: {who} may have moved: {rates} (×{ratio:.3f}, {verdict}): "
            "read the speedup columns rather than the rates"
        )
    return None


def findings_lines(a: Path, b: Path) -> list[str]:
    """Each run's findings, one line per code with the arms it names (what a reader of either
    run's report would be told before trusting its numbers)."""
    from specbench.analysis import load_run
    from specbench.analysis.findings.judge import judge

    out = []
    for label, root in (("a", a), ("b", b)):
        found = judge(load_run(root))
        if not found:
            out.append(f"findings in {label} ({root}): none")
            continue
        out.append(f"findings in {label} ({root}):")
        grouped: dict[str, list[str]] = {}
        for f in found:
            grouped.setdefault(f"{f.severity} {f.code}", []).extend(a for a in f.arms if a)
        for key, arms in grouped.items():
            names = ", ".join(dict.fromkeys(arms))
            out.append(f"  {key}" + (f" ({names})" if names else ""))
    return out


def compare_lines(a: Path, b: Path, df: pd.DataFrame) -> list[str]:
    """What ``compare`` prints after its table: a baseline that moved, what else differs between
    the runs (prompts, workloads, arguments, engine), each run's findings."""
    from specbench.analysis import load_run

    moved = baseline_moved(df, load_run(a).baseline)
    notes = [f"note: the runs differ: {d.what}" for d in differences(a, b)]
    return ([moved] if moved else []) + notes + findings_lines(a, b)
