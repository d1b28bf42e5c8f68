"""``specbench predict --concurrency 1,4,16`` on presets: each level predicted, and the level where
speculation stops paying named from the intervals (theory/levels.py), bracketed by the one before."""

from __future__ import annotations

from typer.testing import CliRunner

from specbench.cli import app
from specbench.engines import theory_priors
from specbench.theory import predict

# A hybrid 27B with a 0.8B draft on a 3090: the host checkpoints of the recurrent state grow with
# every sequence in flight, so the speedup falls fast with C (docs/theory.md).
PRESET = ["--model", "Qwen3.6-27B", "--gpu", "rtx3090", "--method", "draft", "--draft-model", "Qwen3.5-0.8B",
          "--draft-max", "3", "--alpha", "0.7", "--engine", "llamacpp"]  # fmt: skip


def test_predict_names_the_level_where_speculation_stops_paying() -> None:
    out = CliRunner().invoke(app, ["predict", *PRESET, "--concurrency", "1,4,16"]).output
    # a designed α 0.7 and no measured baseline: the intervals are wide (η_bw 0.16–1.00), and the
    # first level whose interval lies at or below 1 is 16
    four, sixteen = (predict("Qwen3.6-27B", "rtx3090", "Q4_K_M", "draft", 3, alpha=0.7,
                             draft_model="Qwen3.5-0.8B", engine="llamacpp", concurrency=c,
                             priors=theory_priors())
                     for c in (4, 16))  # fmt: skip
    assert four.interval is not None and sixteen.interval is not None
    assert four.interval.speedup.high > 1.0 >= sixteen.interval.speedup.high  # the bracket the line names
    assert (
        "speculation stops paying between 4 and 16 in flight"
        f" (predicted {four.interval.speedup.text()} at 4, {sixteen.interval.speedup.text()} at 16)"
    ) in out
    assert all(f"C={c} " in out for c in (1, 4, 16))
    # one level prints the single prediction as before
    single = CliRunner().invoke(app, ["predict", *PRESET, "--concurrency", "4"]).output
    assert "C=4, ctx=4096" in single and "stops paying" not in single
