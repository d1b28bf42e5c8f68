"""Import per-request results written by other harnesses into a specbench run directory.

Published speculative-decoding numbers mostly come from shell scripts, ``vllm bench serve`` or
spreadsheets, not from specbench. Importing them into the run-directory layout lets the same
analysis (speedup with CI, SILENT_FALLBACK, ACCEPTANCE_ARTEFACT, CONFOUND, LOW_N, BIMODAL) judge
them. Nothing here measures: every value comes from the file, converted to specbench's units, and
each record says which file row it came from. See ``docs/import.md`` for the full contract.
Beside the flow: it stands in for matrix → … → store, taking in another harness's file and
handing a run directory on to ``analysis`` and ``report`` like any measured run.

Public API::

    import_file(path, out, *, mapping=None, flags=(), baseline=None, fmt=None) -> ImportResult
    parse_map(specs) -> dict[str, str]      # --map strings → mapping
    parse_columns(specs) -> list[str]       # --flags strings → flags

The data flows through the modules in this order (:func:`import_file` runs them):

- :mod:`~specbench.importer.reading`: the file → a raw frame, columns as the file names them;
- :mod:`~specbench.importer.mapping`: which column (or constant) is which field, and its unit;
- :mod:`~specbench.importer.values`: raw frame → one column per field in specbench units, with
  missing latencies derived and unusable rows dropped;
- :mod:`~specbench.importer.arms`: ``--flags`` columns → command-line flags per arm; the baseline;
- :mod:`~specbench.importer.rundir`: rows → records, manifest, and the run directory on disk.
"""

from __future__ import annotations

from specbench.importer.arms import OFF_VALUES, REQUEST_FLAGS, SPEC_WORDS, parse_columns
from specbench.importer.mapping import (
    ALIASES,
    FIELDS,
    NUMERIC,
    OTHER_FIELDS,
    REQUIRED,
    SECONDS_NAMES,
    UNIT_MS,
    parse_map,
)
from specbench.importer.pipeline import ImportResult, import_file
from specbench.importer.reading import FORMATS

__all__ = [
    "ALIASES",
    "FIELDS",
    "FORMATS",
    "NUMERIC",
    "OFF_VALUES",
    "OTHER_FIELDS",
    "REQUEST_FLAGS",
    "REQUIRED",
    "SECONDS_NAMES",
    "SPEC_WORDS",
    "UNIT_MS",
    "ImportResult",
    "import_file",
    "parse_columns",
    "parse_map",
]
