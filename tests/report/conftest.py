"""Run directories for the report tests, each SYNTHETIC (tests/report/synth.py) and rendered once."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.report import merge_runs, render_report
from tests.report.synth import Arm, Plan, make_run, spec


@pytest.fixture(scope="session")
def three_arms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """baseline 30 tok/s; ``fast`` 45 tok/s (drifting outputs, some holding <script>, slow on code
    prompts, per-position acceptance counters); ``slow`` 20 tok/s. Rendered in every format."""
    plan = Plan(
        arms={
            "baseline": Arm(decode_tok_s=30),
            "fast": spec(45, drift_every=4, category_factor={"code": 0.6}, positions=4),
            "slow": spec(20),
        }
    )
    run = make_run(tmp_path_factory.mktemp("three") / "run", plan)
    render_report(run)
    return run


CJK_CATEGORY = "中文写作"


@pytest.fixture(scope="session")
def demo_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shaped like the demo's report where nothing wins: the baseline arm is named ``baseline``,
    ``draft4`` decodes ×0.8 and ``ngram-mod`` ×0.95, three requests per arm and category (few
    points per box), and one prompt category in Chinese."""
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30), "draft4": spec(24), "ngram-mod": spec(28.5)},
        categories=("chat", "code", CJK_CATEGORY),
        prompts_per_category=1,
        repeats=3,
        workload="natural",
    )
    run = make_run(tmp_path_factory.mktemp("demo") / "run", plan)
    render_report(run, ("md", "html"))
    return run


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Length × concurrency sweep: ``spec`` pays 0.8 s more prefill for 45 vs 30 tok/s, so it loses
    at 32 tokens and wins from 128 on (L* = 0.8 / (1/30 − 1/45) = 72 tokens)."""
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30, prefill_ms=200), "spec": spec(45, prefill_ms=1000)},
        lengths=(32, 128, 512),
        levels=(1, 4),
        prompts_per_category=2,
        repeats=3,  # a verdict needs three launch pairs (fewer: LOW_N, undetermined)
    )
    run = make_run(tmp_path_factory.mktemp("sweep") / "run", plan)
    render_report(run, ("md", "html"))
    return run


def two_machines(root: Path, second_sha: str = "ab" * 32, second_commit: str = "abc1234") -> list[Path]:
    arms = {"baseline": Arm(decode_tok_s=30), "fast": spec(45)}
    slower = {"baseline": Arm(decode_tok_s=30), "fast": spec(36)}
    a = make_run(root / "a", Plan(arms=arms, host="box-a", repeats=3))
    b = make_run(
        root / "b",
        Plan(arms=slower, host="box-b", model_sha=second_sha, engine_commit=second_commit, seed=1, repeats=3),
    )
    return [a, b]


@pytest.fixture(scope="session")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("merge")
    out = merge_runs(two_machines(root), root / "merged")
    render_report(out, ("md", "html"))
    return out
