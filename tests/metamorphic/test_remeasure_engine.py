"""Metamorphic truth checks that re-measure (issue 27, item 8): the designed experiment run again
with its flags spelled another way, its model files copied or linked, or its repeats split over
two runs that ``specbench merge`` pools, must be judged as the session's reference run was.

Each is a fresh run on the real llama-server (tiny lab models, 4 prompts × 32 tokens, about 13 s
each), so noise enters: the tolerance is design.py's ``same_judgment`` — an arm's verdict equal
or, in one of the two runs, ``undetermined`` (never the opposite verdict), the A/A arm holding
×1 in its own 99.9 % launch-level interval and within ×0.67–×1.5 (its verdict left free), the
loser below ×1, and the design's findings (code and arms) equal, ``SELF_DRAFT`` on the
self-drafting arm included.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specbench.errors import ConfigError
from specbench.report.compat import merge_checked
from tests.support import design

pytestmark = pytest.mark.engine


def test_respelled_flags_change_no_verdict_and_no_finding(
    llama_server: Path, reference: Path, tmp_path: Path
) -> None:
    """The reference's effective configuration (context 2048, 1 slot, 1 thread, batch 2048) spelt
    differently in every arm: short and long names mixed (``-c``/``--ctx-size``, ``-t``/
    ``--threads``, ``-b``/``--batch-size``, ``-md``/``--model-draft``), the shared flags moved from
    common_args into every arm, and a common ``-c 1024`` that every arm overrides (the last one
    wins). Catches: CONFOUND (an error, which excludes the arm from the decision) by spelling, by
    where a flag is written, or by reading the first of two values (issue 27: ``--ctx-size 2048``
    over a common ``-c 2048`` was a CONFOUND); the batch size is confirmed by no server report, so
    only the argument table can fold it."""
    pair = design.pair()
    arms = design.arms(pair.draft, pair.target)
    arms["baseline"] += ["-c", "2048", "-t", "1", "-b", "2048"]
    arms["draft8"] = [{"-md": "--model-draft"}.get(a, a) for a in arms["draft8"]]
    arms["draft8"] += ["--ctx-size", "2048", "--threads", "1", "--batch-size", "2048"]
    arms["same"] += ["--ctx-size", "2048", "-t", "1", "--batch-size", "2048"]
    arms["self"] += ["-c", "2048", "--threads", "1", "-b", "2048"]
    common = ["-c", "1024", "--parallel", "1"]
    out = design.run(tmp_path / "m", llama_server, pair.target, arms, common=common)
    design.same_judgment(design.judgment(reference), design.judgment(out))


def test_flag_equals_value_is_refused_before_any_launch(llama_server: Path, tmp_path: Path) -> None:
    """``--ctx-size=2048``: llama-server's own parser refuses it ("error: invalid argument:
    --ctx-size=2048"), so no invariance can hold for this engine; what must hold is that specbench
    says so in one line, naming the arm and the spelling the engine reads, before it launches
    anything (not a run of servers that die at start). Catches: the ``=`` form passed through to
    a server that cannot read it, or folded for the comparison but not for the launch."""
    pair = design.pair()
    arms = {"baseline": [], "same": ["--ctx-size=2048"]}
    with pytest.raises(ConfigError, match=r"same.*--ctx-size=2048.*write --ctx-size 2048") as err:
        design.run(tmp_path / "m", llama_server, pair.target, arms)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "m" / "run" / "cells.jsonl").exists()


@pytest.mark.parametrize("how", ["target-copy-draft-link", "target-link-draft-copy"])
def test_copied_or_linked_model_files_change_no_verdict_and_no_finding(
    llama_server: Path, reference: Path, tmp_path: Path, how: str
) -> None:
    """The target given as a copy (or a symlink) of its file, the draft as a symlink (or a copy),
    and the self arm drafting with the ORIGINAL target file, a different path than the model's:
    ``SELF_DRAFT`` must still be decided by content, nothing may read as a different model. Catches:
    SELF_DRAFT by path (issue 27: a byte-identical copy got ACCEPTANCE_ARTEFACT), a link resolved
    on one side only, CONFOUND on the draft path."""
    pair = design.pair()
    files = tmp_path / "models"
    files.mkdir()
    target, draft = files / "target.gguf", files / "draft.gguf"
    if how == "target-copy-draft-link":
        shutil.copyfile(pair.target, target)
        draft.symlink_to(pair.draft)
    else:
        target.symlink_to(pair.target)
        shutil.copyfile(pair.draft, draft)
    out = design.run(tmp_path / "m", llama_server, target, design.arms(draft, pair.target))
    design.same_judgment(design.judgment(reference), design.judgment(out))


def test_repeats_split_over_two_runs_and_merged_are_judged_the_same(
    llama_server: Path, reference: Path, tmp_path: Path
) -> None:
    """The reference's 4 repeats as two runs of 2, pooled by ``merge`` (as from two sessions or
    two machines): 4 launch pairs again. Catches: merge losing or re-pairing launches (repeat
    numbers colliding: the analysis then fails outright), an arm or a finding lost in the pooling,
    a merged run judged LOW_N or refused as if its halves measured different things."""
    pair = design.pair()
    arms = design.arms(pair.draft, pair.target)
    halves = [design.run(tmp_path / f"half{i}", llama_server, pair.target, arms, repeats=2) for i in range(2)]
    merged, warnings = merge_checked(halves, tmp_path / "merged")
    assert not [w for w in warnings if w.startswith("pooled despite")], warnings
    design.same_judgment(design.judgment(reference), design.judgment(merged))
