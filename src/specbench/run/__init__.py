"""Running a matrix: prepare once, plan, then loop over the cells.

Step 3 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report.

Takes in a ``Matrix`` and its requests: :mod:`prepare` checks everything and opens the run
directory once (``prepare``; nothing launches), :mod:`plan` says what the run will do and how long
it will take (:mod:`planbasis`: the earlier run or probes the estimate rests on), :mod:`runner`
loops over the cells in a seeded counterbalanced order (:mod:`order`), restarts crashed servers and
resumes, :mod:`adaptive` stops arms whose verdict is settled (``repeats: auto``), :mod:`launch`
starts an arm's server (or :mod:`attach` measures one that runs elsewhere), :mod:`drive` sends one
cell's requests (warm-ups, concurrency, arrivals, /metrics, the log window via :mod:`serverlog`),
:mod:`forwardprobe` times the target's forward passes and :mod:`machineload` records the
machine's load; :mod:`progress` shows it on the console. Hands on: the cells to ``executors``
(the next step), each request to ``client`` and every record to ``store``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.run import adaptive as adaptive
    from specbench.run import attach as attach
    from specbench.run import drive as drive
    from specbench.run import forwardprobe as forwardprobe
    from specbench.run import launch as launch
    from specbench.run import machineload as machineload
    from specbench.run import order as order
    from specbench.run import plan as plan
    from specbench.run import planbasis as planbasis
    from specbench.run import prepare as prepare
    from specbench.run import progress as progress
    from specbench.run import runner as runner
    from specbench.run import serverlog as serverlog

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "adaptive",
    "attach",
    "drive",
    "forwardprobe",
    "launch",
    "machineload",
    "order",
    "plan",
    "planbasis",
    "prepare",
    "progress",
    "runner",
    "serverlog",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
