"""``specbench tune``: a race of engine settings, run on top of the flow.

Around the flow matrix → workloads → run → executors → engines → client → store → analysis (theory)
→ report.

Takes in a matrix with a ``tune:`` block (:mod:`specbench.matrix.tuneblock`): :mod:`race` is the
race itself (candidates, eliminations at the sequential rule's confidence, neighbours, the answer)
with no engine in sight, :mod:`execute` runs it on engines through ``run.prepare`` and the runner,
one run directory per workload, and :mod:`plan` is ``tune --dry-run`` (what the race would
launch and roughly how long). Hands on an answer per workload and run directories that
``analysis`` and ``report`` read like any other.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.tune import execute as execute
    from specbench.tune import plan as plan
    from specbench.tune import race as race

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "execute",
    "plan",
    "race",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
