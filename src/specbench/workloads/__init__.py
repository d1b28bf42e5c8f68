"""Prompts to benchmark with: the bundled set, user JSONL files and public dataset formats.

Step 2 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report: takes in a matrix's workload blocks and hands the run its requests.
:mod:`suites` builds the requests of each suite (plain, agent, cache, lengths, levels, rates),
:mod:`prompts` loads the bundled prompts and prompt files, :mod:`datasets` reads public dataset
formats, :mod:`agent` the agent workload, :mod:`length` fits prompts to a target length, :mod:`cut`
notes the bundled prompts a fit cut, :mod:`arrivals` schedules open-loop arrivals and
:mod:`rendered` renders prompts as the engine's chat template would. Hands on: a list of
requests per workload to ``run`` (the next step), which builds them once in ``prepare``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.workloads import agent as agent
    from specbench.workloads import arrivals as arrivals
    from specbench.workloads import cut as cut
    from specbench.workloads import datasets as datasets
    from specbench.workloads import length as length
    from specbench.workloads import prompts as prompts
    from specbench.workloads import rendered as rendered
    from specbench.workloads import suites as suites

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "agent",
    "arrivals",
    "cut",
    "datasets",
    "length",
    "prompts",
    "rendered",
    "suites",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
