"""The CLI's promises from docs/faults.md: a wrong flag or value is one line naming the flag and
exit 2, as the console entry point (not typer's test runner) really behaves."""

from __future__ import annotations

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
