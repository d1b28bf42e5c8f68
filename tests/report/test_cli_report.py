"""``specbench report`` as a user calls it: ``--format json`` prints the findings themselves, so
``specbench report RUN --format json | jq`` works; other formats print the files written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def _report(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "specbench.cli", "report", str(run), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_format_json_prints_the_findings_document_on_stdout(three_arms: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_arms, run)
    done = _report(run, "--format", "json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert printed == json.loads((run / "report" / "findings.json").read_text())
    assert "findings" in printed


def test_other_formats_print_the_files_written(three_arms: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_arms, run)
    done = _report(run, "--format", "md,json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert str(run / "report" / "report.md") in lines and str(run / "report" / "findings.json") in lines


def test_switches_offer_only_their_on_form() -> None:
    for command in ("run", "tune"):
        done = subprocess.run(
            [sys.executable, "-m", "specbench.cli", command, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        )
        assert "--dry-run" in done.stdout and "--no-dry-run" not in done.stdout, done.stdout
        assert "--no-resume" not in done.stdout


def test_the_per_arm_table_says_what_a_speculative_arms_itl_median_means(three_arms: Path) -> None:
    md = (three_arms / "report" / "report.md").read_text()
    per_arm = md[md.index("## Per arm") :]
    assert "ITL is the median gap" in per_arm and "inside a round" in per_arm


def test_lab_prompts_are_said_to_be_lab_vocabulary_and_code_blocks_have_cjk_fonts() -> None:
    """A reader took the lab prompts' CJK code points for a rendering fault (boxes, issue 28)."""
    import pandas as pd

    from specbench.report.page import html
    from specbench.report.page.document import Para
    from specbench.report.prompts import LAB_NOTE, prompt_blocks

    rows = [{"arm": "baseline", "via": "/apply-template", "workload": "w", "category": "repetitive",
             "prompt_id": "lab-cycle-0", "text": "user: 俹丆価\nassistant:", "differs_in": []}]  # fmt: skip
    blocks = prompt_blocks(pd.DataFrame(rows))
    assert any(isinstance(b, Para) and b.text == LAB_NOTE for b in blocks)
    code_rule = next(line for line in html.STYLE.splitlines() if line.startswith("pre, code"))
    assert "Noto Sans CJK SC" in code_rule
    rows[0]["prompt_id"] = "json-09"
    assert not any(isinstance(b, Para) and b.text == LAB_NOTE for b in prompt_blocks(pd.DataFrame(rows)))
