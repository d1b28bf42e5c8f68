"""The order in which a run's arms are launched within each round (repeat): counterbalanced and
seeded, so no arm — the baseline least of all — holds a position of its own.

Plain ABBA (:func:`specbench.matrix.config.plan_cells`) gives every arm the same *mean* position, but
with three arms and more it fixes who runs next to whom: the baseline always first or last, the
same arm always in the middle, the same arm always right after an interim look. Anything that
depends on position (what the previous server left in the caches, what specbench did between
two cells) then reads as a difference between arms. Here each pair of rounds draws a random
permutation of the arms from the matrix's ``seed`` and runs it forward, then backward: ABBA's
cancellation of slow drift holds within every pair of rounds (the estimator in
:mod:`specbench.analysis.launches` weights the two orders equally), and every arm is equally
likely to hold every position and every neighbour. The orders are deterministic for a seed and a
set of arms (a resumed run gets the same ones) and stored in the manifest (``order``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from specbench.matrix.config import Cell

RULE = (
    "per pair of rounds, a seeded random permutation of the arms, forward then reversed "
    "(counterbalanced ABBA: no arm keeps a position or a neighbour)"
)


def round_orders(arms: Sequence[str], rounds: int, seed: int) -> list[list[str]]:
    """The arms' order in each of ``rounds`` rounds (see the module docstring)."""
    # Sorted first: the permutation depends on the seed and the set of arms, not on how the YAML
    # happens to list them. hashlib, not hash(): the same on every run and interpreter.
    names = sorted(arms)
    digest = hashlib.sha256(f"specbench-order:{seed}:{'|'.join(names)}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    orders: list[list[str]] = []
    for start in range(0, rounds, 2):
        forward = rng.sample(names, len(names))
        orders += [forward, forward[::-1]][: rounds - start]
    return orders


def counterbalance(cells: Sequence[Cell], seed: int) -> tuple[list[Cell], list[list[str]]]:
    """``cells`` with each round's arms in :func:`round_orders` order, and those orders.

    Cells keep their repeat and contents; only the order changes. Rounds run in repeat order."""
    arms = list(dict.fromkeys(c.arm for c in cells))
    rounds = sorted({c.repeat for c in cells})
    orders = round_orders(arms, max(rounds, default=-1) + 1, seed)
    out: list[Cell] = []
    for repeat in rounds:
        mine = {c.arm: c for c in cells if c.repeat == repeat}
        out += [mine[a] for a in orders[repeat] if a in mine]
    return out, [orders[r] for r in rounds]
