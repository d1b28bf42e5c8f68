"""What the records and cells show, read once and shared by the findings, the tables and the theory.

:mod:`acceptance` (every acceptance source with its coverage, the /metrics counter deltas),
:mod:`stalls` (each request's stream: gaps, verification rounds, pauses), :mod:`passes` (the
passes a one-token-per-chunk stream shows), :mod:`lag` (the client's own event-loop lag) and
:mod:`noise` (repeat-to-repeat spread, the arms too noisy for a verdict). Nothing here decides
what a reader must be told: that is :mod:`specbench.analysis.findings`.
"""
