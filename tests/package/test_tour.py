"""The newcomer's tour (issue 30, "Done when"): reading the package docstrings in the order of the
flow follows one request from the matrix file to the report. Each package says what it takes in,
what it hands on, and names the package that comes next."""

from __future__ import annotations

import importlib
import re

import pytest

FLOW = [
    "matrix",
    "workloads",
    "run",
    "executors",
    "engines",
    "transport",
    "client",
    "store",
    "analysis",
    "report",
]


@pytest.mark.parametrize("step", range(len(FLOW)))
def test_each_package_docstring_says_what_it_takes_in_hands_on_and_what_comes_next(step: int) -> None:
    doc = importlib.import_module(f"specbench.{FLOW[step]}").__doc__ or ""
    assert re.search(r"(?i)\btakes in\b", doc), FLOW[step]
    assert re.search(r"(?i)\bhands?\b", doc), FLOW[step]
    assert " → ".join(FLOW) in " ".join(doc.split()).replace(" (theory)", ""), FLOW[step]
    if step + 1 < len(FLOW):
        assert f"``{FLOW[step + 1]}``" in doc, f"{FLOW[step]} does not name the next step, {FLOW[step + 1]}"
