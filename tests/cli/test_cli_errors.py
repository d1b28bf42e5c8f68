"""The CLI's promises from docs/faults.md: a wrong flag or value is one line naming the flag and
exit 2, as the console entry point (not typer's test runner) really behaves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def specbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("lab", "make", "--out", "{tmp}", "--arch", "foo"), "--arch"),
        (("lab", "make", "--out", "{tmp}", "--alpha", "1.5"), "--alpha"),
        (("lab", "make", "--out", "{tmp}", "--size", "huge"), "--size"),
        (
            ("predict", "--model", "qwen3-8b", "--gpu", "h100", "--method", "draft", "--alpha", "0.5"),
            "--draft-model",
        ),
        (("predict", "--model", "qwen3-8b", "--gpu", "h100", "--method", "mtp"), "--acceptance"),
        (("run", "matrix.yaml", "--bogus"), "--bogus"),
        (("predict", "--calibrate", "{tmp}", "--tensor-parallel", "2"), "--tensor-parallel"),
        (
            (
                "predict",
                "--model",
                "Llama-3.1-8B",
                "--gpu",
                "h100",
                "--method",
                "eagle3",
                "--acceptance",
                "0.7",
                "--engine",
                "lmdeploy",
            ),
            "--engine",
        ),
        (("predict", "--calibrate", "{tmp}", "--model", "Llama-3.1-8B"), "--model"),
    ],
)
def test_a_wrong_flag_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], flag: str
) -> None:
    done = specbench(*(a.replace("{tmp}", str(tmp_path / "lab")) for a in args))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], done.stderr
    assert "╭" not in done.stderr  # no box


def test_repeats_not_a_number_mentions_auto(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text("model: x.gguf\nrepeats: three\narms:\n  a: []\n")
    done = specbench("run", str(matrix), "--dry-run")
    assert done.returncode == 2
    assert "repeats:" in done.stderr and "auto" in done.stderr and "'three'" in done.stderr


def test_help_is_plain_text_with_upper_case_arguments() -> None:
    done = specbench("run", "--help")
    assert done.returncode == 0
    assert "MATRIX" in done.stdout and "{matrix}" not in done.stdout and "<bool>" not in done.stdout
    assert "specbench[ray]" in done.stdout  # rich markup ate "[ray]"


def test_a_command_group_without_a_command_prints_its_help() -> None:
    done = specbench("lab")
    assert done.returncode == 2 and "make" in done.stderr + done.stdout


def test_workloads_list_is_aligned_and_show_omits_unset_fields() -> None:
    rows = specbench("workloads", "list").stdout.splitlines()
    starts = {len(row) - len(row.split(maxsplit=1)[1]) for row in rows}
    assert len(rows) > 5 and len(starts) == 1  # every description starts in the same column
    shown = specbench("workloads", "show", "natural").stdout
    assert "name: natural" in shown and "None" not in shown


def test_every_option_has_help() -> None:
    from typer.main import get_command

    from specbench.cli import app

    def walk(command: object, path: str) -> list[str]:
        subs = getattr(command, "commands", {})
        found = [f"{path} {p.name}" for p in getattr(command, "params", []) if not getattr(p, "help", "x")]
        return found + [m for name, sub in subs.items() for m in walk(sub, f"{path} {name}")]

    assert walk(get_command(app), "specbench") == []


def test_a_short_gpu_name_with_variants_says_which_it_picked() -> None:
    done = specbench(
        "predict", "--model", "Llama-3.1-8B", "--gpu", "h100", "--method", "ngram", "--alpha", "0.7"
    )
    assert done.returncode == 0, done.stderr
    assert "note: --gpu h100 is the H100 SXM preset; also known: H100 PCIe" in done.stderr
    exact = specbench(
        "predict", "--model", "Llama-3.1-8B", "--gpu", "H100 PCIe", "--method", "ngram", "--alpha", "0.7"
    )
    assert exact.returncode == 0 and "note:" not in exact.stderr


def test_a_yaml_error_shows_its_line_with_a_caret_under_the_column(tmp_path: Path) -> None:
    # Flattened onto one line, the caret pointed at nothing (issue 28).
    matrix = tmp_path / "m.yaml"
    matrix.write_text("model: x.gguf\narms:\n  a: [-c, 512\n  b: []\n")
    done = specbench("run", str(matrix), "--dry-run")
    assert done.returncode == 2, done.stderr
    first, text, caret = done.stderr.rstrip("\n").splitlines()
    assert first.startswith("error: ") and f"{matrix}:4:4: not valid YAML" in first
    assert text.strip() == "b: []" and caret.strip() == "^" and caret.index("^") == text.index(":")


def test_a_yaml_error_line_holding_an_escape_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """The offending line is data from the user's file: a character that reorders the terminal's
    text (YAML refuses C0 escapes but allows a right-to-left override) is shown as text, and the
    caret still stands on its own line under the column."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text("model: x.gguf\narms:\n  a: [-c, 512\n  b\u202e: []\n")
    done = specbench("run", str(matrix), "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "\u202e" not in done.stderr
    assert done.stderr.rstrip("\n").splitlines()[-1].strip() == "^"


def test_predict_engine_adds_that_engines_named_costs() -> None:
    """--engine vllm on a GPU adds vLLM's EAGLE-3 per-drafting-pass cost (theory/engines.py): the
    predicted speedup falls; without --engine no engine-specific cost is assumed."""
    args = ("predict", "--model", "Llama-3.1-8B", "--gpu", "h100", "--method", "eagle3",
            "--acceptance", "0.7", "--draft-max", "3", "--format", "json")  # fmt: skip
    plain, vllm = (json.loads(specbench(*args, *extra).stdout) for extra in ((), ("--engine", "vllm")))
    assert vllm["speedup"] < plain["speedup"]
