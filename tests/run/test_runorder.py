"""The order of arms within each round (issue 27): counterbalanced, seeded, stored in the manifest.

Plain ABBA put the baseline first or last in every round and kept the same arm in the middle (three
arms); anything that depends on a launch's position then reads as a difference between arms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from specbench.executors.base import CellJob
from specbench.matrix.config import Cell
from specbench.run.order import counterbalance, round_orders
from tests.support.runners import make_runner

ARMS = ["baseline", "same", "same2"]


def test_each_pair_of_rounds_runs_one_order_forward_then_backward() -> None:
    orders = round_orders(ARMS, 7, seed=3)
    assert len(orders) == 7 and all(sorted(o) == sorted(ARMS) for o in orders)
    for k in range(0, 6, 2):
        assert orders[k + 1] == orders[k][::-1]  # ABBA within the pair: linear drift cancels
    assert orders == round_orders(ARMS[::-1], 7, seed=3)  # the YAML's order does not matter
    assert orders == round_orders(ARMS, 7, seed=3)  # a resumed run gets the same orders


def test_no_arm_keeps_a_position_across_seeds() -> None:
    """Over seeds, every arm is first, middle and last about equally often; the baseline is not
    always at the ends (plain ABBA: first in every even round, last in every odd one)."""
    positions: Counter[tuple[str, int]] = Counter()
    for seed in range(300):
        for order in round_orders(ARMS, 2, seed):
            positions.update((arm, i) for i, arm in enumerate(order))
    for arm in ARMS:
        for i in range(3):
            assert 150 <= positions[arm, i] <= 250, positions  # 200 expected of 600


def test_the_runner_serves_cells_in_the_stored_counterbalanced_order(tmp_path: Path) -> None:
    seen: list[list[tuple[str, int]]] = []

    class Fake:
        kind = "fake"

        def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None:
            seen.append([(c.arm, c.repeat) for c in cells])

    runner = make_runner(tmp_path)
    planned = list(runner.cells)
    runner.executor = Fake()
    runner.run()
    order = runner.store.manifest()["order"]
    assert order["seed"] == 0 and "counterbalanced" in order["rule"]
    assert seen == [[(arm, r) for r, arm_order in enumerate(order["rounds"]) for arm in arm_order]]
    assert sorted(seen[0]) == sorted((c.arm, c.repeat) for c in planned)  # same cells, new order
    reordered, rounds = counterbalance(planned, seed=0)
    assert rounds == order["rounds"] and [c.arm for c in reordered] == [a for a, _ in seen[0]]
