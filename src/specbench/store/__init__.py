"""The run directory and everything specbench keeps on disk.

Step 7 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report.

Takes in records, cells, the manifest and the environment: :mod:`rundir` is the run directory
(``RunStore``: the one record writer, environment, model SHA-256), :mod:`schema` its
``SCHEMA_VERSION`` with its history and typed records, :mod:`journal` the append-only JSONL that
survives kills and full disks, :mod:`recordwriter` appends records from a thread, :mod:`safeio`
is the one guarded write path (a failed write is exit 5), :mod:`redact` keeps secrets out of
every file, :mod:`settled` says which records ``--resume`` must not send again, :mod:`outdir`
checks ``--out`` (writable, locked, a run there or not), :mod:`machineprobe` stores the machine
numbers the theory uses, and :mod:`paths` is the cache (engine builds, lab models) and the
kernel's path limits. Hands a run directory on to ``analysis``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.store import journal as journal
    from specbench.store import machineprobe as machineprobe
    from specbench.store import outdir as outdir
    from specbench.store import paths as paths
    from specbench.store import recordwriter as recordwriter
    from specbench.store import redact as redact
    from specbench.store import rundir as rundir
    from specbench.store import safeio as safeio
    from specbench.store import schema as schema
    from specbench.store import settled as settled
    from specbench.store import sink as sink

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "journal",
    "machineprobe",
    "outdir",
    "paths",
    "recordwriter",
    "redact",
    "rundir",
    "safeio",
    "schema",
    "settled",
    "sink",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
