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
