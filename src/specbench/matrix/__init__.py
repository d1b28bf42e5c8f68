"""The matrix file format: what a run is asked to measure.

Step 1 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report.

Takes in a matrix file (YAML): :mod:`parse` turns its text into data (duplicate keys refused,
syntax errors with a caret), :mod:`config` validates it into a frozen ``Matrix`` and plans its
``Cell`` s (one arm × repeat × workload), :mod:`names` checks every string that becomes a file
name, argv word or environment entry, :mod:`files` is the one resolver of every path a matrix
names (against the matrix file's folder; ``specbench:NAME`` templates) and reads them guarded,
and :mod:`tuneblock` is the ``tune:`` block. Hands on a ``Matrix`` to ``workloads`` (requests)
and ``run`` (prepare).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.matrix import config as config
    from specbench.matrix import files as files
    from specbench.matrix import load as load
    from specbench.matrix import names as names
    from specbench.matrix import parse as parse
    from specbench.matrix import tuneblock as tuneblock

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "config",
    "files",
    "load",
    "names",
    "parse",
    "tuneblock",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
