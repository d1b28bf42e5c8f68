"""Text from data reaches the terminal escaped: an ANSI escape in a prompt id, a model's output
or an engine's log line is shown as ``\\x1b``, never interpreted; a "[/x]" in it is text, not
rich markup (a MarkupError used to end the run as an internal error)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import yaml
from rich.console import Console

from specbench.report import summary
from specbench.run import progress
from specbench.run.console import printable
from specbench.run.progress import RunProgress, restart_text
from tests.support.paths import FAKE_BIN
from tests.support.procs import specbench

NASTY = "p\x1b[31mred\x1b]0;title\x07\r\u202eevil[/INST][bold]"


def test_printable_shows_control_characters_and_keeps_lines_and_text() -> None:
    assert printable(NASTY, markup=False) == "p\\x1b[31mred\\x1b]0;title\\x07\\x0d\\u202eevil[/INST][bold]"
    assert printable("a\tb\nc é ✓ [x]", markup=False) == "a\tb\nc é ✓ [x]"
    assert printable("[/INST][bold]") == "\\[/INST]\\[bold]"  # rich reads "\[" as a bracket


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The progress console as a terminal that keeps what it was sent (a terminal interprets
    escapes, so whatever raw escape reaches this stream would reach a user's screen)."""
    sink = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=sink, force_terminal=False, width=400))
    yield sink


def _sent(sink: io.StringIO) -> str:
    return sink.getvalue()


def test_a_failed_arm_shows_its_reason_and_log_tail_escaped(captured: io.StringIO) -> None:
    observer = RunProgress(total=1)
    observer("failed", {"arm": "a", "reason": f"engine did not start: {NASTY}", "log_tail": f"x\n{NASTY}"})
    observer("retry", {"arm": "a", "prompt_id": NASTY})
    observer("cell", {"arm": "a", "repeat": 0, "requests": 1})
    out = _sent(captured)
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out
    assert out.count("p\\x1b[31mred") == 3 and out.count("[/INST][bold]") == 3


def test_a_restart_after_a_hang_says_specbench_stopped_the_engine() -> None:
    hung = "no /health answer within 5 s after ReadTimeout"
    assert restart_text({"arm": "d", "exit_code": -9, "hung": hung}) == (
        f"d: engine stopped answering ({hung}); specbench stopped it (exit code -9); restarting once"
    )
    assert (
        restart_text({"arm": "d", "exit_code": 1, "hung": None})
        == "d: engine exited (code 1); restarting once"
    )


def test_the_summary_table_escapes_arm_names_and_verdicts() -> None:
    row = {
        **dict.fromkeys(("ttft_ms", "decode_tok_s", "e2e_ms", "speedup"), 1.0),
        **dict.fromkeys(("ci_low", "ci_high", "acceptance"), float("nan")),
        **{"arm": NASTY, "status": "ok", "requests": 1, "errors": 0, "acceptance_source": ""},
        "verdict": NASTY,
    }
    result: Any = SimpleNamespace(
        run=SimpleNamespace(confidence=0.95), summary=pd.DataFrame([row]), points=[]
    )
    sink = io.StringIO()
    Console(file=sink, force_terminal=False, width=400).print(summary.summary_table(result))
    out = sink.getvalue()
    assert "\x1b" not in out and "\r" not in out
    assert out.count("[/INST][bold]") == 2  # the arm and its verdict, as text


def test_an_arm_name_is_never_broken_across_lines_in_a_narrow_terminal() -> None:
    """The report of issue 28: "ngram-\nmod" in the arm column read as two arms at 80 columns."""
    rows = [
        {
            **dict.fromkeys(("ttft_ms", "decode_tok_s", "e2e_ms", "speedup"), 1.0),
            **dict.fromkeys(("ci_low", "ci_high", "acceptance"), float("nan")),
            **{"arm": arm, "status": "ok", "requests": 24, "errors": 0, "acceptance_source": ""},
            "verdict": "undetermined (about 12 more launches, 5–40)",
        }
        for arm in ("baseline", "ngram-mod", "draft-simple-k8")
    ]
    result: Any = SimpleNamespace(run=SimpleNamespace(confidence=0.95), summary=pd.DataFrame(rows), points=[])
    sink = io.StringIO()
    Console(file=sink, force_terminal=False, width=80).print(summary.summary_table(result))
    out = sink.getvalue()
    assert "ngram-mod" in out and "draft-simple-k8" in out, out


def test_a_prompt_id_with_escapes_reaches_the_console_escaped(tmp_path: Path) -> None:
    """The issue's case: ANSI escapes in prompt ids reached the terminal raw (the plan lists ids).
    Whether the id is accepted or refused, nothing raw may be printed."""
    rows = [{"id": "p\x1b[31m1\x1b]0;pwned\x07", "prompt": "hi"}, {"id": "p2", "prompt": "yo"}]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    matrix = {
        "engine": "vllm",
        "model": "Qwen/Qwen3-8B",
        "engine_binary": str(FAKE_BIN / "fake-vllm"),
        "arms": {"baseline": []},
        "workload": {"suite": "natural", "max_tokens": 4, "prompts": 2, "prompt_file": "prompts.jsonl"},
        "repeats": 1,
    }
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(matrix))
    proc = specbench("run", str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "run"), "--dry-run")
    output = proc.communicate(timeout=120)[0]
    assert "internal error" not in output and "\x1b" not in output and "\x07" not in output
    assert "p\\x1b[31m1" in output, output
