"""specbench: measure whether speculative decoding makes a model faster, with evidence.

The public API is re-exported here lazily (PEP 562), so ``import specbench`` and ``specbench
--help`` do not pay for pandas, SciPy and matplotlib::

    import specbench
    out = specbench.run_matrix("matrix.yaml", "runs/mine")
    run = specbench.load_run(out)
    specbench.comparisons(run), specbench.findings(run), specbench.decision_table(run)
    result = specbench.analyse(run, out)  # everything the report shows, as one Analysis

The packages follow one request (README, "Layout"): matrix → workloads → run → executors →
engines → transport → client → store → analysis (theory) → report; each package's ``__init__``
says what it takes in, what it hands on and which step comes next.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name -> module that defines it ("module:attribute" where the name differs there); the only
#: names ``from specbench import *`` gives.
_EXPORTS = {
    "SCHEMA_VERSION": "specbench.store.schema",  # its history is in schema.py
    "run_matrix": "specbench.api",
    "prepare_run": "specbench.api",
    "plan_run": "specbench.api",
    "tune": "specbench.api",
    "load_run": "specbench.analysis",
    "comparisons": "specbench.analysis",
    "findings": "specbench.analysis:judge",
    "decision_table": "specbench.analysis",
    "Analysis": "specbench.analysis",
    "analyse": "specbench.analysis",
    "render_report": "specbench.report",
    "load_matrix": "specbench.matrix.load",
    "SpecbenchError": "specbench.errors",
}
__all__ = ["SCHEMA_VERSION", "__version__", *(n for n in _EXPORTS if n != "SCHEMA_VERSION")]

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specbench' has no attribute {name!r}")
    module, _, attribute = module.partition(":")
    return getattr(importlib.import_module(module), attribute or name)
