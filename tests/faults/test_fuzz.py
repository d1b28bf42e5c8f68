"""Malformed inputs — matrix fields, YAML, CLI flags, imported files, damaged run directories —
each give one line on stderr, a documented exit code, and no traceback.

The engine binary is /bin/false: should a mutation be accepted by mistake, nothing real starts
(and the run exits 6, which the test reports as a silent acceptance).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli import app

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
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code in allowed, f"exit {code}: {err}"
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "internal error" not in lines[0] and "Traceback" not in err, err


def _write(folder: Path, matrix: dict[str, Any] | str) -> Path:
    (folder / "model.gguf").write_bytes(b"GGUF")
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
