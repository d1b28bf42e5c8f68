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
