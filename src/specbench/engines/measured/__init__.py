"""What each engine was measured to do, as the theory reads it: one module per engine, each value
with where it came from (host costs, verify-cost curves, recurrent-state traffic, whether the
catch-up pass drafts). The engine class hands its module's terms on (``Origin.theory_terms``), and
:func:`specbench.engines.theory_priors` gathers every engine's for whoever predicts (``specbench
predict``, a run's predicted-vs-measured, bench/theory_published.py). The value types, and what a
prediction does with them, are specbench.theory.measured's; these modules load the theory (and
SciPy), so the engine classes import them on use.
"""
