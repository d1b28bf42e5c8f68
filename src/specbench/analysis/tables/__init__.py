"""The report's tables, computed from a loaded run: per-workload and per-category summaries
(:mod:`frames`), the measures each operating point is judged on (:mod:`measures`), sweeps
(:mod:`sweeps`), goodput under SLOs (:mod:`goodput`) and the length crossover (:mod:`crossover`).
Numbers only: ``report/`` renders them.
"""
