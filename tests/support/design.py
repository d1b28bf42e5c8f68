"""The designed experiment the metamorphic tests transform, and what they compare (issue 27.8).

Tiny dense lab model whose draft is never accepted (α 0): ``draft8`` drafts 8 tokens a round and
loses clearly (×0.15–×0.6 on this machine), ``same`` is the baseline again (A/A), ``self`` drafts
with the target's own file (``SELF_DRAFT``, decided by the file's content). Two categories of two
prompts each, so the per-category verdicts (one family with the arms) are in play too. About 13 s
of engine time per run on the 2-core machine.

What "the same judgment" means depends on whether a transformation re-measures:

* Of the data (:func:`exact`): the same records re-expressed must give the same numbers: every
  ratio and interval to 1e-9, every verdict and finding (code, severity, arms) equal.
* Re-measured (:func:`same_judgment`): two runs of one matrix differ by noise. On this shared
  2-core machine (load average up to 6) one launch of the tiny model runs at one of two or three
  speeds, and four launches can leave even a ×0.22 loss ``undetermined`` (seen: 95 % CI
  0.03–1.86). So an arm's two verdicts must be equal or one of them ``undetermined`` (noise can
  only take a verdict away, never turn ``slower`` into ``faster`` or ``equivalent``); the A/A arm
  shows no difference on its own launch-level interval at 99.9 % and reads within ×0.67–×1.5
  (:func:`aa_interval`, :data:`AA_BAND`; its verdict at the run's 95 % is left free: a 95 %
  family gives a false one in up to 5 % of runs by design); the loser's point estimate stays
  below ×1; and every finding
  about the experiment's design (code and arms) must be equal. Left out: findings that read the
  machine or the timing distribution of this launch (:data:`NOISE`), which come and go between two
  runs of the very same matrix; those read from the noisy verdict itself (:data:`SPEED`); and
  the per-category verdicts (two prompts a category).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from specbench import api
from specbench.analysis import analyse_dir, load_run, stats
from specbench.analysis.result import Analysis
from tests.conftest import Pair, lab_pair

PROMPTS = [
    {"id": f"p{i}", "category": ("copy", "open")[i % 2], "prompt": f"Write note {i} about the river."}
    for i in range(4)
]
NOISE = frozenset(
    {"BUSY_MACHINE", "BIMODAL", "UNSTABLE", "DRIFT", "CLIENT_BEHIND", "CLIENT_SERVER_DISAGREE",
     "STALLED", "LATE_SENDS", "UNTIMED_DECODE"}
)  # fmt: skip
SPEED = frozenset({"SPEC_LOSS", "LARGE_LOSS", "KEEP_OFF"})  # follow the speedup's verdict
# -b 2048 is llama-server's default batch size, written out so that the respelled run has a flag
# no server report confirms (the context, slots and threads are settled by /props and the log).
COMMON = ["-c", "2048", "-np", "1", "-t", "1", "-b", "2048"]


def pair() -> Pair:
    return lab_pair(arch="dense", alpha=0.0)


def draft(path: Path | str, k: int = 8) -> list[str]:
    return ["-md", str(path), "--spec-type", "draft-simple", "--spec-draft-n-max", str(k)]


def arms(draft_path: Path | str, self_path: Path | str) -> dict[str, list[str]]:
    """The design's arms; ``self_path``: the draft file of ``self``, the target's own bytes."""
    return {"baseline": [], "draft8": draft(draft_path), "same": [], "self": draft(self_path, 4)}


def run(
    folder: Path,
    binary: Path,
    model: Path | str,
    arms: dict[str, list[str]],
    *,
    common: list[str] | None = None,
    repeats: int = 4,
    prompts: list[dict[str, Any]] | None = None,
    baseline: str = "baseline",
) -> Path:
    """Run the matrix in ``folder`` (created) and return its run directory."""
    folder.mkdir()
    rows = PROMPTS if prompts is None else prompts
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    body = {
        "model": str(model),
        "engine_binary": str(binary),
        "common_args": COMMON if common is None else common,
        "arms": arms,
        "baseline": baseline,
        "repeats": repeats,
        "warmup": 1,
        "seed": 0,
        "workload": {"suite": "natural", "max_tokens": 32, "prompt_file": "prompts.jsonl"},
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    return api.run_matrix(folder / "matrix.yaml", folder / "run")


Judgment = tuple[dict[str, str], dict[str, float], set[tuple[str, tuple[str, ...]]], tuple[float, float]]
#: The A/A arm's check: its own launch-level interval at this level must hold ×1, and its ratio
#: stay within ×(1/AA_BAND)–×AA_BAND. A band of ×0.8–×1.25 alone (until a CI run read ×0.79)
#: fails whenever four launches of the tiny model land on different speeds: launch-pair means
#: spread by 10–18 % (sd of the log-ratio) on the 2-core machine, and one copied-model run's
#: "same" launches read ×0.71–×0.93 (interval 0.54–1.16). The interval catches a copy read ×0.8
#: launch after launch (a gross error: a flag or file not what it seems) where the launches agree
#: within ~3 %; with four launches at t(3) it is wide otherwise, so the band catches ×0.67 or ×1.5
#: whatever the noise (5 standard errors at the spread above).
AA_CONFIDENCE = 0.999
AA_BAND = 1.5


def judgment(out: Path) -> Judgment:
    """The arms' verdicts and ratios, the design findings as (code, arms), and the A/A arm's
    interval at :data:`AA_CONFIDENCE` (:func:`aa_interval`)."""
    result = analyse_dir(out)
    verdicts = {arm: str(c.verdict) for arm, c in result.comparisons.items()}
    ratios = {arm: c.ratio for arm, c in result.comparisons.items()}
    found = {(f.code, tuple(sorted(f.arms))) for f in result.findings if f.code not in NOISE | SPEED}
    return verdicts, ratios, found, aa_interval(out)


def aa_interval(out: Path, arm: str = "same") -> tuple[float, float]:
    """The A/A ``arm``'s speedup interval over the run's baseline at :data:`AA_CONFIDENCE`: the
    run's own estimator (the launch-level mixed model) on its own data, alone (no family)."""
    data = load_run(out)
    c = stats.speedup(data.df, arm, data.baseline, "decode_tok_s", confidence=AA_CONFIDENCE)
    return float(c.ci_low), float(c.ci_high)


def aa_holds(interval: tuple[float, float], ratio: float) -> bool:
    return interval[0] <= 1.0 <= interval[1] and 1 / AA_BAND < ratio < AA_BAND


def same_judgment(a: Judgment, b: Judgment) -> None:
    """The re-measured invariance (module docstring)."""
    (va, ra, fa, aa_a), (vb, rb, fb, aa_b) = a, b
    assert va.keys() == vb.keys()
    for arm in va:
        assert va[arm] == vb[arm] or "undetermined" in (va[arm], vb[arm]), (arm, va, vb)
    # The A/A arm: a verdict there is a false one, which a 95 % family makes in up to 5 % of runs
    # by design (seen once in a CI run: "slower"), so no verdict is asserted; a gross error, beyond
    # its own launches' noise, is (AA_CONFIDENCE). Bias is tests/metamorphic/test_aa_engine's.
    assert aa_holds(aa_a, ra["same"]) and aa_holds(aa_b, rb["same"]), (ra, rb, aa_a, aa_b)
    assert "faster" not in (va["draft8"], vb["draft8"]) and ra["draft8"] < 1 and rb["draft8"] < 1, (ra, rb)
    assert fa == fb
    assert ("SELF_DRAFT", ("self",)) in fa  # the design's own truth, in both


def exact(result: Analysis) -> dict[str, Any]:
    """Everything a user reads from ``result`` that the records decide: per arm and per (category,
    arm) the ratio, interval, level and verdict; every finding's code, severity and arms."""

    def row(c: Any) -> tuple[Any, ...]:
        return (_num(c.ratio), _num(c.ci_low), _num(c.ci_high), c.confidence, c.family, str(c.verdict))

    cats = result.categories.speedups
    return {
        "arms": {arm: row(c) for arm, c in result.comparisons.items()},
        "categories": {
            (r["category"], r["arm"]): (
                _num(r["speedup"]),
                _num(r["ci_low"]),
                _num(r["ci_high"]),
                r["verdict"],
            )
            for r in cats.to_dict("records")
        },
        "findings": sorted((f.code, f.severity, tuple(sorted(f.arms))) for f in result.findings),
    }


def _num(x: float) -> float | str:
    """Rounded so that re-expressing the same floats in another order (sums, CSV text) compares
    equal; NaN as text, since NaN != NaN."""
    return "nan" if math.isnan(x) else round(float(x), 9)
