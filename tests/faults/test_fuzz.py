"""Malformed inputs — matrix fields, YAML, CLI flags, imported files, damaged run directories —
each give one line on stderr, a documented exit code, and no traceback.

The engine binary is /bin/false: should a mutation be accepted by mistake, nothing real starts
(and the run exits 6, which the test reports as a silent acceptance).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import math
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli import app
from tests.fakes.common import Request, Response, not_found, serve, sse

DOCUMENTED = {1, 2, 3, 4, 5}
BASE: dict[str, Any] = {
    "model": "model.gguf",
    "common_args": ["-c", "512"],
    "arms": {"baseline": [], "draft": ["-md", "model.gguf", "--spec-type", "draft-simple"]},
    "workload": {"suite": "natural", "max_tokens": 8, "prompts": 2},
    "repeats": 1,
    "warmup": 0,
    "engine_binary": "/bin/false",
}
BAD_NUMBERS: list[Any] = [
    0,
    -1,
    -(10**9),
    10**12,
    1e20,
    math.inf,
    -math.inf,
    math.nan,
    "many",
    [1],
    {"a": 1},
    2.5,
]

# field -> bad values (top level of the matrix, or "workload.<field>")
FIELDS: dict[str, list[Any]] = {
    "repeats": BAD_NUMBERS,
    "warmup": [-1, 10**6, math.inf, "x", 1.5, [0]],
    "seed": [-1, 2**70, "seed", 1.5, math.nan],
    "concurrency": [0, -3, 10**7, math.inf, "x"],
    "request_timeout": [0, -1, math.inf, math.nan, 1e30, "soon"],
    "startup_timeout": [0, -5, math.inf, math.nan, "later"],
    "host": ["0.0.0.0", "example.com", "10.0.0.1", 5, ["127.0.0.1"]],
    "forward_probe": ["maybe", [True], {"a": 1}],
    "alpha": [0, -0.1, 0.5, math.nan, math.inf, "five"],
    "engine": ["tgi", 3, None, ["vllm"]],
    "model": ["missing.gguf", 5, ["model.gguf"], "", "/"],
    "common_args": ["-c 512", 5, {"-c": "512"}, ["-md", "missing.gguf"]],
    "arms": [{}, [], "baseline", {"../x": []}, {"a b": []}, {"": []}, {"baseline": "str"}, {"é": []}],
    "baseline": ["nope", 5, ["baseline"]],
    "env": ["A=1", ["A"], {"A": ["x"]}, {"A": {"b": 1}}],
    "resources": ["gpu", {"nope": {"num_gpus": 1}}, {"*": {"num_gpus": "one"}}, {"*": 5}],
    "api_key_env": ["SPECBENCH_FUZZ_UNSET_VARIABLE", 5, ["X"]],
    "engine_binary": ["/nonexistent/llama-server", "/etc/hostname", 5],
    "unknown_field": [1],
    "workload.suite": ["nope", 5, ["single"]],
    "workload.max_tokens": [0, -1, 1e20, 10**9, "x", 2.5, math.inf],
    "workload.temperature": [-1, math.inf, math.nan, "hot", 1e9],
    "workload.prompts": [0, -1, 10**9, "x"],
    "workload.prompt_file": ["missing.jsonl", 5, "/"],
    "workload.categories": ["chat", 5, [5], ["no-such-category"]],
    "workload.ignore_eos": ["maybe", [1]],
    "workload.scale": [0, -1, math.inf, math.nan, 1e9, "big"],
    "workload.input_tokens": [0, -1, 10**9, "x"],
    "workload.lengths": [[], [0], [-5], ["a"], 5, [10**9], [math.inf]],
    "workload.levels": [[], [0], [-1], ["x"], 3, [10**9]],
    "workload.extra_body": [{"max_tokens": 5}, {"stream": False}, {"messages": []}, {"seed": 1}, "str", [1]],
    "workload.nonsense": [1],
}


def _mutations() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for field, values in FIELDS.items():
        for i, value in enumerate(values):
            matrix = json.loads(json.dumps(BASE))
            if field.startswith("workload."):
                matrix["workload"][field.split(".", 1)[1]] = value
            else:
                matrix[field] = value
            out.append((f"{field}-{i}", matrix))
    return out


RAW_FILES = {
    "not-yaml": "model: [unclosed\n",
    "a-list": "- 1\n- 2\n",
    "a-scalar": "42\n",
    "empty": "",
    "binary": "\x00\x01\x02\xff",
    "tabs": "model:\tx\n\tarms: 1\n",
    "anchors": "a: &a [*a]\n",
    "deep": "a: " + "[" * 500 + "]" * 500 + "\n",
}


def _invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return -1, f"traceback: {type(result.exception).__name__}: {result.exception}"
    return result.exit_code, result.stderr


def _assert_one_line(code: int, err: str, allowed: set[int] = DOCUMENTED) -> None:
    """One ``error:`` line; a YAML syntax error may follow it with its line and caret, indented."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code in allowed, f"exit {code}: {err}"
    assert lines and lines[0].startswith("error: "), err
    assert all(ln.startswith("  ") for ln in lines[1:]) and len(lines) <= 3, err
    assert len(lines) == 1 or "not valid YAML" in lines[0], err
    assert "internal error" not in lines[0] and "Traceback" not in err, err


#: A whole GGUF with no tensors (magic, version 3, no tensors, no keys): it passes the model-file
#: check, so each case reaches the check of the input it mutates (four bytes read as cut short).
STAND_IN_GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)


def _write(folder: Path, matrix: dict[str, Any] | str) -> Path:
    (folder / "model.gguf").write_bytes(STAND_IN_GGUF)
    path = folder / "matrix.yaml"
    path.write_text(matrix if isinstance(matrix, str) else yaml.safe_dump(matrix))
    return path


@pytest.mark.parametrize("name, matrix", _mutations(), ids=[n for n, _ in _mutations()])
def test_a_malformed_matrix_field_is_one_line(tmp_path: Path, name: str, matrix: dict[str, Any]) -> None:
    code, err = _invoke(["run", str(_write(tmp_path, matrix)), "--out", str(tmp_path / "run")])
    _assert_one_line(code, err)


@pytest.mark.parametrize("name", sorted(RAW_FILES))
def test_a_malformed_matrix_file_is_one_line(tmp_path: Path, name: str) -> None:
    code, err = _invoke(["run", str(_write(tmp_path, RAW_FILES[name])), "--out", str(tmp_path / "run")])
    _assert_one_line(code, err)


CLI_CASES: dict[str, Callable[[Path, Path], list[str]]] = {
    "arm-escapes": lambda m, o: [
        "run",
        str(m),
        "--out",
        str(o),
        "--attach",
        "http://127.0.0.1:9",
        "--arm",
        "../../x",
    ],
    "arm-slash": lambda m, o: [
        "run",
        str(m),
        "--out",
        str(o),
        "--attach",
        "http://127.0.0.1:9",
        "--arm",
        "a/b",
    ],
    "retry-no-resume": lambda m, o: ["run", str(m), "--out", str(o), "--retry-failed"],
    "executor": lambda m, o: ["run", str(m), "--out", str(o), "--executor", "nope"],
    "attach-ray": lambda m, o: ["run", str(m), "--out", str(o), "--attach", "http://x", "--executor", "ray"],
    "key-env-unset": lambda m, o: ["run", str(m), "--out", str(o), "--api-key-env", "SPECBENCH_FUZZ_UNSET"],
    "no-matrix": lambda m, o: ["run", str(m.parent / "nope.yaml"), "--out", str(o)],
    "matrix-is-dir": lambda m, o: ["run", str(m.parent), "--out", str(o)],
    "out-is-file": lambda m, o: ["run", str(m), "--out", str(m)],
    "llama-server-missing": lambda m, o: ["run", str(m), "--out", str(o), "--llama-server", "/nope"],
    "summary-missing": lambda m, o: ["summary", str(o)],
    "report-missing": lambda m, o: ["report", str(o)],
    "report-format": lambda m, o: ["report", str(o), "--format", "pdf"],
    "compare-missing": lambda m, o: ["compare", str(o), str(o)],
    "predict-nothing": lambda m, o: ["predict"],
    "predict-calibrate-missing": lambda m, o: ["predict", "--calibrate", str(o)],
    "workloads-show": lambda m, o: ["workloads", "show", "nope"],
    "workloads-load-missing": lambda m, o: ["workloads", "load", str(o / "x.jsonl")],
    "lab-arch": lambda m, o: ["lab", "make", "--out", str(o), "--arch", "nope"],
    "engine-install": lambda m, o: ["engine", "install", "tgi"],
    "import-missing": lambda m, o: ["import", str(o / "x.csv"), "--out", str(o / "imp")],
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_a_malformed_command_line_is_one_line(tmp_path: Path, name: str) -> None:
    matrix = _write(tmp_path, BASE)
    code, err = _invoke(CLI_CASES[name](matrix, tmp_path / "run"))
    _assert_one_line(code, err)


def _good_csv(folder: Path) -> Path:
    rows = ["arm,prompt,repeat,decode_tok_s,e2e_ms,draft_n,draft_accepted"]
    for arm, rate in (("base", 20.0), ("spec", 30.0)):
        for prompt in range(4):
            for rep in range(2):
                rows.append(f"{arm},p{prompt},{rep},{rate + prompt},{1000 / (rate + prompt)},8,5")
    path = folder / "good.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


IMPORTS: dict[str, str] = {
    "empty": "",
    "header-only": "arm,prompt,decode_tok_s\n",
    "no-arm": "prompt,decode_tok_s\np,1\n",
    "no-metric": "arm,prompt\na,p\n",
    "negative-rate": "arm,prompt,decode_tok_s\na,p,-5\n",
    "infinite-rate": "arm,prompt,decode_tok_s\na,p,inf\n",
    "nan-rate": "arm,prompt,decode_tok_s\na,p,nan\n",
    "text-rate": "arm,prompt,decode_tok_s\na,p,fast\n",
    "negative-e2e": "arm,prompt,e2e_ms\na,p,-1\n",
    "ragged": "arm,prompt,decode_tok_s\na,p\nb,q,1,2,3\n",
    "binary": "\x00\xff\xfe,\x01\n",
    "accepted-over-drafted": "arm,prompt,decode_tok_s,draft_n,draft_accepted\na,p,5,2,9\n",
}


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_a_malformed_import_is_one_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(IMPORTS[name].encode("latin-1"))
    code, err = _invoke(["import", str(path), "--out", str(tmp_path / "run"), "--baseline", "a"])
    _assert_one_line(code, err)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "no-manifest": lambda d: (d / "manifest.json").unlink(),
    "manifest-garbage": lambda d: (d / "manifest.json").write_text("{oops"),
    "manifest-list": lambda d: (d / "manifest.json").write_text("[]"),
    "manifest-null": lambda d: (d / "manifest.json").write_text("null"),
    "manifest-newer": lambda d: (d / "manifest.json").write_text('{"schema_version": 999}'),
    "manifest-arms-list": lambda d: _edit(d, arms=["a"]),
    "manifest-matrix-str": lambda d: _edit(d, matrix="x"),
    "manifest-arms-in-matrix-list": lambda d: _edit(d, matrix={"arms": ["base"], "baseline": "base"}),
    "manifest-baseline-missing": lambda d: _edit(d, matrix={"arms": {"x": []}, "baseline": "nope"}),
    "records-garbage": lambda d: (d / "records.jsonl").write_text("garbage\n{]\n"),
    "records-empty": lambda d: (d / "records.jsonl").write_text(""),
    "records-gone": lambda d: (d / "records.jsonl").unlink(),
    "records-wrong-types": lambda d: (d / "records.jsonl").write_text(
        json.dumps({"arm": 5, "prompt_id": [], "repeat": "x", "chunks": "no", "error": None}) + "\n"
    ),
    "records-torn": lambda d: _append(d / "records.jsonl", b'{"arm": "base", "pro'),
    "cells-garbage": lambda d: (d / "cells.jsonl").write_text("[1]\nnope\n"),
    "env-garbage": lambda d: (d / "env.json").write_text("{{{"),
    "env-list": lambda d: (d / "env.json").write_text("[1, 2]"),
}


def _edit(run_dir: Path, **fields: Any) -> None:
    path = run_dir / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


@pytest.mark.parametrize("command", ["summary", "report"])
@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_a_damaged_run_directory_is_one_line_or_a_report(tmp_path: Path, name: str, command: str) -> None:
    run_dir = tmp_path / "run"
    code, err = _invoke(["import", str(_good_csv(tmp_path)), "--out", str(run_dir), "--baseline", "base"])
    assert code == 0, err
    DAMAGE[name](run_dir)
    code, err = _invoke([command, str(run_dir)])
    if code != 0:  # tolerating damage (a torn line, no cells) is fine; crashing is not
        _assert_one_line(code, err)


# --- The edge campaign (issue 29) -------------------------------------------------------------
# Inputs that once ended in `internal error` (exit 1), hung, or were silently accepted. Each runs
# the console entry point in a subprocess, as a user would: any exit code other than the
# documented one, a traceback, an `internal error`, a run past BOUND_S (a hang) or a secret of the
# matrix in any output or file fails the case.

SECRET = "sk-fuzz-7f3a9c1e5b2d"
ENV_SECRET = "tok-fuzz-2d8e6b0a4c9f"
EDGE_BASE: dict[str, Any] = {
    **BASE,
    "common_args": ["-c", "512", "--api-key", SECRET],
    "env": {"HF_TOKEN": ENV_SECRET},
}
BOUND_S = 60  # far above any case's own time on a busy machine; a FIFO or /dev/zero never ends


def _edge_matrix(folder: Path, workload: dict[str, Any] | None = None, **top: Any) -> str:
    matrix = {**json.loads(json.dumps(EDGE_BASE)), **top}
    matrix["workload"] = {**matrix["workload"], **(workload or {})}
    return str(_write(folder, matrix))


def _edge_text(folder: Path, text: str) -> str:
    return str(_write(folder, text))


def _a_run(folder: Path) -> Path:
    """A run directory as a run leaves it (what the checks before a resume read of it)."""
    run_dir = folder / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"schema_version": 1, "matrix": BASE, "arms": {}}))
    (run_dir / "records.jsonl").write_text("")
    return run_dir


def _records_a_folder(folder: Path) -> Path:
    run_dir = _a_run(folder)
    (run_dir / "records.jsonl").unlink()
    (run_dir / "records.jsonl").mkdir()
    return run_dir


HELD: list[int] = []  # lock files this process holds for a case (closed after it)


def _locked_run(folder: Path) -> Path:
    """A run directory whose lock another specbench holds (here: this test process)."""
    run_dir = _a_run(folder)
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b"4242\n")
    HELD.append(fd)
    return run_dir


def _fifo(folder: Path) -> str:
    path = folder / "prompts.jsonl"
    os.mkfifo(path)
    return str(path)


def _cut_gguf(folder: Path) -> str:
    """The first four bytes of a GGUF: what an interrupted download leaves."""
    path = folder / "cut.gguf"
    path.write_bytes(b"GGUF")
    return str(path)


def _a_file(folder: Path) -> str:
    path = folder / "afile"
    path.write_text("x")
    return str(path)


DUPLICATE_REPEATS = yaml.safe_dump(EDGE_BASE) + "repeats: 5\n"
DUPLICATE_ARM = (
    "model: model.gguf\nengine_binary: /bin/false\narms:\n  baseline: []\n  draft: []\n  baseline: [-x]\n"
)
NOT_YAML = "model: model.gguf\narms:\n  baseline: [-c, 512\n  draft: []\n"
OUT = "{out}"  # replaced by the case's run directory

# name -> (setup: folder -> argv after `specbench`, documented exit code, a piece of the error line)
EDGES: dict[str, tuple[Callable[[Path], list[str]], int, str]] = {
    "arm-name-300": (
        lambda t: ["run", _edge_matrix(t, arms={"a" * 300: []}, baseline="a" * 300), "--dry-run"],
        2,
        "at most 64 characters",
    ),
    "model-path-5000": (lambda t: ["run", _edge_matrix(t, model="/" + "m" * 5000), "--dry-run"], 2, "model"),
    "out-5000": (lambda t: ["run", _edge_matrix(t), "--dry-run", "--out", "o" * 5000], 2, "--out"),
    "out-part-300": (lambda t: ["run", _edge_matrix(t), "--out", str(t / ("o" * 300))], 2, "--out"),
    "nul-in-arm-args": (
        lambda t: ["run", _edge_matrix(t, arms={"baseline": [], "draft": ["--spec", "x\0y"]}), "--dry-run"],
        2,
        "NUL",
    ),
    "nul-in-env-value": (
        lambda t: ["run", _edge_matrix(t, env={"HF_TOKEN": ENV_SECRET, "X": "a\0b"}), "--dry-run"],
        2,
        "NUL",
    ),
    "nul-in-secret": (
        lambda t: ["run", _edge_matrix(t, common_args=["--api-key", SECRET[:6] + "\0" + SECRET[6:]])],
        2,
        "NUL",
    ),
    "env-name-with-equals": (lambda t: ["run", _edge_matrix(t, env={"A=B": "x"}), "--dry-run"], 2, "'A=B'"),
    "env-name-empty": (lambda t: ["run", _edge_matrix(t, env={"": "x"}), "--dry-run"], 2, "env"),
    "attach-port-99999": (
        lambda t: ["run", _edge_matrix(t, engine="openai"), "--attach", "http://127.0.0.1:99999"],
        2,
        "--attach",
    ),
    "attach-password-bad-port": (
        lambda t: ["run", _edge_matrix(t, engine="openai"), "--attach", f"http://u:{SECRET}@127.0.0.1:99999"],
        2,
        "--attach http://u:***@",
    ),
    "attach-password-nothing-answers": (
        lambda t: ["run", _edge_matrix(t, engine="openai"), "--attach", f"http://u:{SECRET}@127.0.0.1:9"],
        4,
        "nothing answers",
    ),
    "attach-not-a-url": (
        lambda t: ["run", _edge_matrix(t, engine="openai"), "--attach", "localhost"],
        2,
        "--attach",
    ),
    "resume-records-a-folder": (
        lambda t: ["run", _edge_matrix(t), "--out", str(_records_a_folder(t)), "--resume"],
        5,
        "records.jsonl",
    ),
    "resume-records-a-folder-dry": (
        lambda t: ["run", _edge_matrix(t), "--out", str(_records_a_folder(t)), "--resume", "--dry-run"],
        5,
        "records.jsonl",
    ),
    "resume-empty-dir": (
        lambda t: ["run", _edge_matrix(t), "--out", str(t), "--resume"],
        5,
        "holds no run",
    ),
    "resume-empty-dir-dry": (
        lambda t: ["run", _edge_matrix(t), "--out", str(t), "--resume", "--dry-run"],
        5,
        "holds no run",
    ),
    "resume-missing-dir": (
        lambda t: ["run", _edge_matrix(t), "--out", str(t / "nope"), "--resume"],
        5,
        "holds no run",
    ),
    "lab-make-out-a-file": (lambda t: ["lab", "make", "--out", _a_file(t)], 2, "not a folder"),
    "lab-make-out-empty": (lambda t: ["lab", "make", "--out", ""], 2, "--out"),
    "out-empty": (lambda t: ["run", _edge_matrix(t), "--out", ""], 2, "--out: empty"),
    "out-empty-dry": (lambda t: ["run", _edge_matrix(t), "--out", "", "--dry-run"], 2, "--out: empty"),
    "prompt-file-dev-zero": (
        lambda t: ["run", _edge_matrix(t, {"prompt_file": "/dev/zero"}), "--dry-run"],
        2,
        "character device",
    ),
    "prompt-file-fifo": (
        lambda t: ["run", _edge_matrix(t, {"prompt_file": _fifo(t)}), "--dry-run"],
        2,
        "FIFO",
    ),
    "prompt-file-fifo-run": (lambda t: ["run", _edge_matrix(t, {"prompt_file": _fifo(t)})], 2, "FIFO"),
    "prompt-file-a-folder": (
        lambda t: ["run", _edge_matrix(t, {"prompt_file": str(t)}), "--dry-run"],
        2,
        "folder",
    ),
    "model-dev-zero": (
        lambda t: ["run", _edge_matrix(t, model="/dev/zero"), "--dry-run"],
        2,
        "character device",
    ),
    "model-cut-short": (lambda t: ["run", _edge_matrix(t, model=_cut_gguf(t)), "--dry-run"], 2, "cut short"),
    "model-cut-short-run": (lambda t: ["run", _edge_matrix(t, model=_cut_gguf(t))], 2, "cut short"),
    "matrix-a-fifo": (lambda t: ["run", _fifo(t), "--dry-run"], 2, "FIFO"),
    "duplicate-repeats": (
        lambda t: ["run", _edge_text(t, DUPLICATE_REPEATS), "--dry-run"],
        2,
        "repeats: given twice",
    ),
    "duplicate-arm": (
        lambda t: ["run", _edge_text(t, DUPLICATE_ARM), "--dry-run"],
        2,
        "baseline: given twice (lines 4 and 6)",
    ),
    "yaml-caret": (lambda t: ["run", _edge_text(t, NOT_YAML), "--dry-run"], 2, "matrix.yaml:4:"),
    "dry-run-resume-locked": (
        lambda t: ["run", _edge_matrix(t), "--out", str(_locked_run(t)), "--resume", "--dry-run"],
        5,
        "being written by another specbench (pid 4242",
    ),
    "llama-server-path-5000": (
        lambda t: ["run", _edge_matrix(t), "--dry-run", "--llama-server", "/" + "l" * 5000],
        2,
        "--llama-server",
    ),
    "summary-path-5000": (lambda t: ["summary", "/" + "r" * 5000], 2, "too long"),
    "report-path-5000": (lambda t: ["report", "/" + "r" * 5000], 2, "too long"),
    "matrix-path-5000": (lambda t: ["run", "/" + "m" * 5000, "--dry-run"], 2, "matrix file"),
    "import-out-empty": (lambda t: ["import", str(_good_csv(t)), "--out", ""], 2, "--out: empty"),
    "tune-out-empty": (lambda t: ["tune", _edge_matrix(t), "--out", ""], 2, "--out: empty"),
    "demo-out-empty": (lambda t: ["demo", "--out", ""], 2, "--out: empty"),
    "merge-out-empty": (lambda t: ["merge", str(t), str(t), "--out", ""], 2, "--out: empty"),
    "arm-without-attach": (lambda t: ["run", _edge_matrix(t), "--arm", "x", "--dry-run"], 2, "--arm"),
    "dry-run-remote-host": (lambda t: ["run", _edge_matrix(t, host="0.0.0.0"), "--dry-run"], 2, "host"),
}


@pytest.fixture(scope="module", autouse=True)
def _imported() -> None:
    """What the commands import lazily, imported once here so that each forked case has it."""
    for name in ("specbench.api", "specbench.analysis", "specbench.report.summary", "specbench.run.progress"):
        importlib.import_module(name)


def _specbench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``specbench ARGS`` as the console entry point runs it (its own process, exit code, stdout
    and stderr), forked from this already-imported process: a fresh interpreter would spend
    seconds importing on a busy machine, per case. A child still running after BOUND_S is a
    hang: killed, and the case fails."""
    out, err = cwd / ".stdout", cwd / ".stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.chdir(cwd)
            os.environ["SPECBENCH_CACHE"] = str(cwd / ".cache")  # never the user's engine builds
            os.environ.pop("SPECBENCH_DEBUG", None)
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the child's own stdout
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            app(args=args, prog_name="specbench")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:
            print(f"Traceback: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    code = _wait(pid)
    return subprocess.CompletedProcess(args, code, out.read_text(), err.read_text())


def _wait(pid: int) -> int:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"no answer within {BOUND_S} s: a hang")


def _assert_no_secret(done: subprocess.CompletedProcess[str], folder: Path) -> None:
    for secret in (SECRET, ENV_SECRET):
        assert secret not in done.stdout + done.stderr, "a secret reached the console"
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.endswith(".yaml") and path.stat().st_size < 10_000_000:
                assert secret.encode() not in path.read_bytes(), f"a secret reached {path}"


@pytest.mark.parametrize("name", sorted(EDGES))
def test_an_edge_input_gets_its_documented_code_at_once(tmp_path: Path, name: str) -> None:
    setup, code, says = EDGES[name]
    args = setup(tmp_path)
    if "--out" not in args and args[0] == "run":
        args += ["--out", str(tmp_path / "out")]
    try:
        done = _specbench(args, tmp_path)
    finally:
        while HELD:
            os.close(HELD.pop())
    _assert_one_line(done.returncode, done.stderr, {code})
    assert says in done.stderr, done.stderr
    _assert_no_secret(done, tmp_path)


class StandIn:
    """A FAKE OpenAI-compatible server (not an engine): /v1/models, /health, a chat stream, and
    what a test sets: the /metrics body, or HTTP 400 for every chat request. Counts chats."""

    def __init__(self) -> None:
        self.metrics: str | None = None
        self.refuse = False
        self.chats = 0

    def __call__(self, request: Request) -> Response:
        path = request.url.path
        if path == "/v1/models":
            return Response(200, json={"data": [{"id": "stand-in"}]})
        if path == "/health":
            return Response(200, json={"status": "ok"})
        if path == "/metrics":
            return Response(200, text=self.metrics) if self.metrics is not None else not_found()
        if path == "/v1/chat/completions":
            self.chats += 1
            if self.refuse:  # what a server says to a prompt longer than its context
                return Response(400, json={"error": {"message": "the request exceeds the context"}})
            delta = [{"choices": [{"index": 0, "delta": {"content": "ok "}}]}] * 2
            end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
            usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
            return sse([*delta, end, usage, "[DONE]"])
        return not_found()


@pytest.fixture
def standin() -> Iterator[tuple[StandIn, str]]:
    server = StandIn()
    with serve(server) as url:
        yield server, url


def _attach_matrix(folder: Path) -> str:
    return _edge_matrix(folder, engine="openai", workload={"prompts": 2, "max_tokens": 4}, env={})


def test_an_attached_server_whose_metrics_are_not_prometheus_is_refused_at_once(
    tmp_path: Path, standin: tuple[StandIn, str]
) -> None:
    server, url = standin
    server.metrics = "{}"
    done = _specbench(
        ["run", _attach_matrix(tmp_path), "--attach", url, "--out", str(tmp_path / "o")], tmp_path
    )
    _assert_one_line(done.returncode, done.stderr, {4})
    assert "/metrics" in done.stderr and server.chats == 0, done.stderr


def test_a_request_refused_with_400_is_not_sent_again_on_resume(
    tmp_path: Path, standin: tuple[StandIn, str]
) -> None:
    server, url = standin
    server.refuse = True
    matrix, out = _attach_matrix(tmp_path), tmp_path / "o"
    first = _specbench(
        ["run", matrix, "--attach", url, "--arm", "a", "--out", str(out), "--no-report"], tmp_path
    )
    assert first.returncode == 6, first.stderr  # none of the arm's requests succeeded
    sent, records = server.chats, (out / "records.jsonl").read_text().splitlines()
    assert sent == len(records) == 2, (sent, records)
    again = _specbench(
        ["run", matrix, "--attach", url, "--arm", "a", "--out", str(out), "--resume", "--no-report"], tmp_path
    )
    assert again.returncode == 6, again.stderr
    assert server.chats == sent  # the same request would be refused again: one error, counted once
    assert (out / "records.jsonl").read_text().splitlines() == records


def test_an_out_on_a_read_only_file_system_is_exit_5_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No unprivileged test can mount a read-only file system: the kernel's two answers for one
    # (access(2) refuses W_OK with EROFS, statvfs(2) reports ST_RDONLY) are stood in for.
    from specbench.errors import StoreError
    from specbench.store import outdir

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(outdir.os, "access", lambda path, mode: False)
    monkeypatch.setattr(outdir.os, "statvfs", lambda path: ReadOnly())
    with pytest.raises(StoreError, match="read-only file system") as caught:
        outdir.check_run_dir(tmp_path / "new" / "run", resume=False)
    assert caught.value.exit_code == 5 and "--out" in str(caught.value)


@pytest.mark.parametrize("dry", [False, True])
def test_an_out_on_a_real_read_only_file_system_is_exit_5(tmp_path: Path, dry: bool) -> None:
    """A tmpfs remounted read-only (where the test may mount one): the run and its dry run both
    refuse ``--out`` there before anything starts, naming why."""
    from tests.support.procs import tiny_disk

    matrix = _edge_matrix(tmp_path)
    with tiny_disk(tmp_path, 64) as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        done = _specbench(
            ["run", matrix, "--out", str(disk / "run"), *(["--dry-run"] if dry else [])], tmp_path
        )
    _assert_one_line(done.returncode, done.stderr, {5})
    assert "read-only file system" in done.stderr and "--out" in done.stderr, done.stderr
    _assert_no_secret(done, tmp_path)
