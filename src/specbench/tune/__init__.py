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
