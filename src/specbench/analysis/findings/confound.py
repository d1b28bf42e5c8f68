"""CONFOUND: an arm whose effective non-speculative settings differ from the baseline's.

What the flags *mean* is compared, with the servers' own word deciding
(:mod:`specbench.analysis.findings.settings`): a speedup measured against a baseline that ran
with other settings is not the speculation's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from specbench.analysis.findings import settings
from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.engines.argstore import StoredArgs
from specbench.engines.base import Engine


class Code(StrEnum):
    CONFOUND = "CONFOUND"


SEVERITY = {Code.CONFOUND: Severity.ERROR}
ANCHOR = "confound"


def check(ev: RunEvidence) -> list[Finding]:
    run = ev.run
    if run.baseline not in run.arms:
        return []
    return confounds(
        {a: run.arm_args(a) for a in run.arms},
        run.baseline,
        engine=run.engine,
        cells=run.cells,
        stored=run.engine_args,  # the table the run used, not the one installed here
    )


def confounds(
    arms: Mapping[str, Sequence[str]],
    baseline: str,
    engine: Engine,
    env_by_arm: dict[str, dict[str, Any]] | None = None,
    cells: Sequence[Mapping[str, Any]] | None = None,
    stored: StoredArgs | None = None,
) -> list[Finding]:
    """Arms whose effective non-speculative settings differ from the baseline's
    (:mod:`specbench.analysis.findings.settings`). ``arms``: each arm's full argv, ``common_args`` first
    (``RunData.arm_args``); ``cells``: the run's cells, whose server reports decide; ``stored``:
    the argument table the run stored (``RunData.engine_args``), which alone decides where present
    (the engine installed where the report is made is asked only for a run that stored none)."""
    out = []
    table, how = settings.argument_table(engine, stored)
    spelt = settings.spellings(list(arms.values()), table)
    said = settings.reported(cells or [], engine)
    base = settings.effective_settings(arms[baseline], engine, table)
    for arm, args in arms.items():
        if arm == baseline:
            continue
        mine = settings.effective_settings(args, engine, table)
        diff = settings.differences(mine, base, (said.get(arm, {}), said.get(baseline, {})), spelt)
        if diff:
            out.append(
                Finding(
                    Code.CONFOUND,
                    (baseline, arm),
                    f"{arm} differs from {baseline} in non-speculative settings: "
                    f"{'; '.join(d.describe() for d in diff)}. Compared by effective value "
                    f"(common_args merged, the last of repeated flags winning; aliases from {how}).",
                    SEVERITY[Code.CONFOUND],
                )
            )
    for key, values in _env_differences(env_by_arm or {}).items():
        evidence = f"arms differ in {key}: {values}."
        out.append(Finding(Code.CONFOUND, tuple(sorted(values)), evidence, SEVERITY[Code.CONFOUND]))
    return out


def _env_differences(env_by_arm: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = {k for env in env_by_arm.values() for k in env}
    return {
        k: {a: e.get(k) for a, e in env_by_arm.items()}
        for k in keys
        if len({str(e.get(k)) for e in env_by_arm.values()}) > 1
    }


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
