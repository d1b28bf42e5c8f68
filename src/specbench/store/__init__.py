"""The run directory and everything specbench keeps on disk.

Step 7 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report.

Takes in records, cells, the manifest and the environment: :mod:`rundir` is the run directory
(``RunStore``: the one record writer, environment, model SHA-256), :mod:`schema` its
``SCHEMA_VERSION`` with its history and the shapes of its lines, :mod:`record` a line read once
as a ``Record`` (with the server's counts, engine-neutral), :mod:`journal` the append-only JSONL
that survives kills and full disks, :mod:`recordwriter` appends records from a thread, :mod:`safeio`
is the one guarded write path (a failed write is exit 5), :mod:`redact` keeps secrets out of
every file, :mod:`settled` says which records ``--resume`` must not send again, :mod:`outdir`
checks ``--out`` (writable, locked, a run there or not), :mod:`machineprobe` stores the machine
numbers the theory uses, and :mod:`paths` is the cache (engine builds, lab models) and the
kernel's path limits. Hands a run directory on to ``analysis``.
"""

from __future__ import annotations
