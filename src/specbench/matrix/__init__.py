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
