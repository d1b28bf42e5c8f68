"""Shared fixtures (helpers the tests import are in tests/support). Engine tests drive a real
llama-server, built once into the cache; every test that asks for an engine fixture is marked
``engine`` here, so ``pytest -m "not engine"`` never starts a build."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.engines.install import BuildOptions, find_llama_server, install_llamacpp
from tests.support.lab import Pair, lab_pair
from tests.support.marks import mark_engine_tests
from tests.support.paths import BENCH

pytest_plugins = ["pytester"]  # tests/package/test_engine_mark.py collects the suite in-process


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_engine_tests(items)


@pytest.fixture(scope="session")
def llama_server() -> Path:
    """The cached llama-server (built from the pinned sdist on first use: several minutes)."""
    found = find_llama_server(None, BuildOptions())
    if found is not None:
        return found

    def report(done: int, total: int, _line: str) -> None:
        if done % 20 == 0 or done == total:
            print(f"building llama-server: {done}/{total}", flush=True)

    return install_llamacpp(BuildOptions(), progress=report)


@pytest.fixture(scope="session")
def dense_pair() -> Pair:
    return lab_pair(arch="dense", alpha=0.8)


@pytest.fixture(scope="session")
def moe_pair() -> Pair:
    return lab_pair(arch="moe", alpha=0.9)


@pytest.fixture(scope="session")
def stream_server() -> Iterator[str]:
    """bench/stream_server.py (the client bench's yardstick: a chunk every 2 ms to every open
    stream, each carrying its send time on the shared monotonic clock), its own process; the URL
    of its chat endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = BENCH / "stream_server.py"
    argv = [sys.executable, str(script), "--port", str(port), "--interval-ms", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        proc.terminate()
        proc.wait()


# -- SYNTHETIC run directories (tests/support/synth.py), each rendered once ------------------------
# Their imports are inside the fixtures: the report and the theory take seconds to import, which
# every pytest session would otherwise pay, also one that asks for none of these runs.
@pytest.fixture(scope="session")
def three_arms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """baseline 30 tok/s; ``fast`` 45 tok/s (drifting outputs, some holding <script>, slow on code
    prompts, per-position acceptance counters); ``slow`` 20 tok/s. Rendered in every format."""
    from specbench.report import render_report
    from tests.support.synth import Arm, Plan, make_run, spec

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


@pytest.fixture(scope="session")
def demo_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shaped like the demo's report where nothing wins: the baseline arm is named ``baseline``,
    ``draft4`` decodes ×0.8 and ``ngram-mod`` ×0.9, three requests per arm and category (few
    points per box), and one prompt category in Chinese."""
    from specbench.report import render_report
    from tests.support.synth import CJK_CATEGORY, Arm, Plan, make_run, spec

    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30), "draft4": spec(24), "ngram-mod": spec(27)},
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
    from specbench.report import render_report
    from tests.support.synth import Arm, Plan, make_run, spec

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


@pytest.fixture(scope="session")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from specbench.report import merge_runs, render_report
    from tests.support.synth import two_machines

    root = tmp_path_factory.mktemp("merge")
    out = merge_runs(two_machines(root), root / "merged")
    render_report(out, ("md", "html"))
    return out
