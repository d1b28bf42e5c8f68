"""Metamorphic truth checks on one real run's own records, re-expressed (issue 27, item 8): the
same measurements must be judged the same, to the last digit.

Both transformations reuse the session's measured run of the designed experiment (conftest.py's
``reference``, real llama-server, tiny lab models) and re-analyse identical measurements, so no
noise enters and no tolerance is needed: every ratio, interval and level (to 1e-9: sums taken in
another order), every verdict, arm and per-category, and every finding (code, severity, arms).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import analyse_dir
from specbench.importer import import_file
from tests.support import design

pytestmark = pytest.mark.engine

# New ids in the reverse order of the old ones when sorted, of other lengths, one that looks
# like a number and one like a path: pairing or ordering by the id's text, not its identity,
# shows.
REID = {"p0": "zz-river", "p1": "10", "p2": "2", "p3": "a/b"}
# Findings whose evidence a per-request CSV does not carry: the load average specbench samples
# per cell (BUSY_MACHINE), the client's chunk read lag (CLIENT_BEHIND), the models' SHA-256 in
# env.json (SELF_DRAFT). An import measures nothing (docs/import.md), so it cannot restate them.
# BIMODAL is kept: its code and arms come from the rates; only its sentence cites the load.
NOT_IN_CSV = frozenset({"BUSY_MACHINE", "CLIENT_BEHIND", "SELF_DRAFT"})


def _map_ids(value: Any) -> Any:
    """``value`` with every prompt id (a string equal to an old id) replaced, at any depth."""
    if isinstance(value, dict):
        return {k: _map_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_ids(v) for v in value]
    return REID.get(value, value) if isinstance(value, str) else value


def _reexpress(src: Path, dst: Path) -> Path:
    """A copy of run ``src`` with every prompt re-id'd and the records, cells and the manifest's
    prompt list in another order (each record keeps its ``seq``, its launch and its timings)."""
    shutil.copytree(src, dst)
    rng = random.Random(27)
    for name in ("records.jsonl", "cells.jsonl"):
        rows = [_map_ids(json.loads(line)) for line in (dst / name).read_text().splitlines() if line]
        rng.shuffle(rows)
        (dst / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("manifest.json", "plan.json"):
        body = _map_ids(json.loads((dst / name).read_text()))
        if isinstance(body.get("prompts"), list):
            body["prompts"].reverse()
        (dst / name).write_text(json.dumps(body))
    return dst


def test_reordering_and_re_iding_prompts_gives_identical_numbers(reference: Path, tmp_path: Path) -> None:
    """Catches: any judgment that depends on the order the records were written in (a check that
    reads the file's order as time, the first record of an arm or a launch) or on the text of a
    prompt id rather than its identity (an id read as a number, "10" before "2", or split at a
    slash; a pairing or check that walks prompts in id order)."""
    moved = _reexpress(reference, tmp_path / "run")
    before, after = analyse_dir(reference), analyse_dir(moved)
    assert {r.prompt_id for r in after.run.records if not r.warmup} == set(REID.values())
    assert design.exact(before) == design.exact(after)


def test_importing_the_runs_own_per_request_csv_gives_the_same_judgment(
    reference: Path, tmp_path: Path
) -> None:
    """The run's requests as the report's per-request table (requests.parquet) written to CSV, then
    ``specbench import``ed: the speedups, intervals and verdicts, arm and per-category, must be
    identical, and so must every finding whose evidence is in the file. Catches: a column mapped
    to the wrong field or unit, repeats re-numbered so that launches no longer pair, values
    rounded on the way, an imported run judged by another estimator."""
    native = analyse_dir(reference)
    csv = tmp_path / "requests.csv"
    native.detail.to_csv(csv, index=False)
    imported = analyse_dir(import_file(csv, tmp_path / "imported", baseline="baseline").out)
    a, b = design.exact(native), design.exact(imported)
    assert a["arms"] == b["arms"] and a["categories"] == b["categories"]
    # Without the models' hashes, accepted == drafted on every request is all the import can see
    # of a self-draft: it says the weaker ACCEPTANCE_ARTEFACT where the run said SELF_DRAFT.
    weaker = [("ACCEPTANCE_ARTEFACT", "warning", f[2]) for f in a["findings"] if f[0] == "SELF_DRAFT"]
    assert weaker, a["findings"]  # the design's self arm
    kept = sorted([f for f in a["findings"] if f[0] not in NOT_IN_CSV] + weaker)
    assert kept == [f for f in b["findings"] if f[0] not in NOT_IN_CSV]
