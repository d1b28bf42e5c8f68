"""Executors: where the runner's cells run.

Step 4 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report: takes in the planned cells from ``run`` and hands each one to the cell
driver on this machine or on a cluster node, whose engine (``engines``) and client (``client``)
measure it.

An executor receives the planned cells and a :class:`~specbench.executors.base.CellJob` (the plan's
rules, a function that serves one cell here, and what a worker elsewhere needs to serve one) and
makes every cell happen; the runner keeps the plan, the run directory and the record schema.
Executors never import the runner (:mod:`specbench.executors.base` is the seam). ``local`` (the
default) serves each cell on this machine in order. ``ray`` (``pip install 'specbench[ray]'``)
runs each cell as a Ray task on a cluster node that has the arm's resources and streams the
records back to this process, which appends them to the one run directory. Ray is imported
only when it is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.errors import ConfigError
from specbench.executors.base import Executor
from specbench.executors.local import LocalExecutor

EXECUTORS = ("local", "ray")


def make_executor(
    kind: str,
    *,
    address: str | None = None,
    resources: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> Executor:
    """``local`` or ``ray``; ``address`` and ``resources`` (per arm, ``"*"`` for all) are Ray's."""
    if kind == "local":
        return LocalExecutor()
    if kind == "ray":
        try:
            from specbench.executors.ray_executor import RayExecutor
        except ImportError as exc:
            raise ConfigError(f"--executor ray needs Ray ({exc}): pip install 'specbench[ray]'") from exc
        return RayExecutor(address=address, resources=resources, **options)
    raise ConfigError(f"--executor: unknown executor {kind!r} (known: {', '.join(EXECUTORS)})")


__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "make_executor"]
