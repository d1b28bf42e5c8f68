"""Matrix files: what is accepted, and the one-line errors for what is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.errors import ConfigError
from specbench.matrix.config import plan_cells
from specbench.matrix.load import load_matrix
from specbench.workloads.suites import build_requests

GOOD = """\
engine: llamacpp
model: models/target.gguf
common_args: ["-c", "4096"]
arms:
  baseline: []
  draft8: ["-md", "models/draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
workload: {suite: single, max_tokens: 200, temperature: 0}
repeats: 3
"""


@pytest.fixture
def models(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    for name in ("target.gguf", "draft.gguf"):
        (tmp_path / "models" / name).write_bytes(b"GGUF")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "matrix.yaml"
    path.write_text(text)
    return path


def test_the_issue_example_loads_and_resolves_paths(models: Path) -> None:
    matrix = load_matrix(write(models, GOOD))
    assert matrix.model == str(models / "models" / "target.gguf")
    assert matrix.arm_args("draft8")[:3] == ["-c", "4096", "-md"]
    assert matrix.arm_args("draft8")[3] == str(models / "models" / "draft.gguf")
    assert matrix.workload.max_tokens == 200 and matrix.repeats == 3


def test_cells_interleave_arms_abba(models: Path) -> None:
    matrix = load_matrix(write(models, GOOD))
    requests, warmup, conc = build_requests(matrix, models)
    order = [(c.arm, c.repeat) for c in plan_cells(matrix, requests, warmup, conc)]
    assert order == [
        ("baseline", 0),
        ("draft8", 0),
        ("draft8", 1),
        ("baseline", 1),
        ("baseline", 2),
        ("draft8", 2),
    ]
    assert len(requests) == 10 and warmup[0].category == "warmup"


def test_a_typo_names_file_line_and_field(models: Path) -> None:
    path = write(models, GOOD.replace("repeats: 3", "repeets: 3"))
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    assert str(err.value).startswith(f"{path}:8: repeets: unknown field")
    assert "\n" not in str(err.value)


def test_a_bad_value_inside_workload_names_its_line(models: Path) -> None:
    path = write(models, GOOD.replace("max_tokens: 200", "max_tokens: -1"))
    with pytest.raises(ConfigError, match=r"matrix.yaml:7: workload.max_tokens: .*greater than 0"):
        load_matrix(path)


def test_missing_model_file_fails_before_anything_launches(models: Path) -> None:
    path = write(models, GOOD.replace("models/draft.gguf", "models/nope.gguf"))
    with pytest.raises(ConfigError, match=r"arms.draft8: -md: no such file .*nope.gguf"):
        load_matrix(path)


def test_baseline_must_be_an_arm(models: Path) -> None:
    with pytest.raises(ConfigError, match="baseline 'base' is not one of the arms"):
        load_matrix(write(models, GOOD + "baseline: base\n"))


def test_unknown_suite_lists_the_valid_ones(models: Path) -> None:
    matrix = load_matrix(write(models, GOOD.replace("suite: single", "suite: nope")))
    with pytest.raises(ConfigError, match=r"unknown suite .nope.; known: .*single"):
        build_requests(matrix, models)


def test_not_yaml_and_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_matrix(write(tmp_path, "arms: [unclosed"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_matrix(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="no such matrix file"):
        load_matrix(tmp_path / "absent.yaml")


def test_resources_must_name_arms(models: Path) -> None:
    good = GOOD + "resources: {'*': {num_cpus: 1}, draft8: {num_gpus: 1}}\n"
    assert load_matrix(write(models, good)).resources["draft8"] == {"num_gpus": 1.0}
    with pytest.raises(ConfigError, match=r"resources name no arm: \['draft9'\]"):
        load_matrix(write(models, GOOD + "resources: {draft9: {num_gpus: 1}}\n"))


def test_an_attach_matrix_needs_neither_model_nor_arms(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, "engine: openai\nworkload: {suite: natural, max_tokens: 8}\n"))
    assert matrix.engine == "openai" and matrix.model == ""
    with pytest.raises(ConfigError, match="model: required for engine llamacpp"):
        load_matrix(write(tmp_path, "arms: {baseline: []}\n"))


def test_repeats_auto_plans_the_budget_and_marks_the_run_adaptive(models: Path) -> None:
    matrix = load_matrix(write(models, GOOD.replace("repeats: 3", "repeats: auto\nmax_repeats: 6")))
    assert matrix.adaptive and matrix.repeats == 6 and matrix.max_minutes is None
    plain = load_matrix(write(models, GOOD))
    assert not plain.adaptive and plain.repeats == 3
    with pytest.raises(ConfigError, match="max_repeats"):
        load_matrix(write(models, GOOD.replace("repeats: 3", "repeats: auto\nmax_repeats: 2")))
    with pytest.raises(ConfigError, match="at least 3 launches"):
        load_matrix(write(models, (GOOD + "adaptive: true\n").replace("repeats: 3", "repeats: 2")))


def test_the_adaptive_false_verdict_rate_defaults_to_five_percent_and_is_bounded(models: Path) -> None:
    auto = GOOD.replace("repeats: 3", "repeats: auto")
    assert load_matrix(write(models, auto)).alpha == 0.05
    assert load_matrix(write(models, auto + "alpha: 0.001\n")).alpha == 0.001
    for bad in ("0", "0.5", ".nan"):
        with pytest.raises(ConfigError, match="alpha"):
            load_matrix(write(models, auto + f"alpha: {bad}\n"))


def test_client_processes_below_one_names_the_field(models: Path) -> None:
    path = write(models, GOOD + "client_processes: 0\n")
    with pytest.raises(ConfigError, match=r"matrix.yaml:\d+: client_processes: .*greater than or equal to 1"):
        load_matrix(path)
    assert load_matrix(write(models, GOOD + "client_processes: 4\n")).client_processes == 4


def test_a_key_given_twice_is_an_error_naming_it_and_both_lines(models: Path) -> None:
    # PyYAML lets the last one win without a word (issue 29): the run would not be the file's.
    with pytest.raises(ConfigError, match=r"matrix.yaml:9: repeats: given twice \(lines 8 and 9\)"):
        load_matrix(write(models, GOOD + "repeats: 10\n"))
    twice = GOOD.replace("  baseline: []\n", "  baseline: []\n  baseline: [-t, '2']\n")
    with pytest.raises(ConfigError, match=r"matrix.yaml:6: baseline: given twice \(lines 5 and 6\)"):
        load_matrix(write(models, twice))
    from specbench.matrix.parse import parse_matrix_yaml  # a merge key may still override

    assert parse_matrix_yaml(Path("m"), "a: &a {x: 1}\nb: {<<: *a, x: 2}\n")["b"] == {"x": 2}


def test_a_yaml_syntax_error_keeps_its_line_column_and_caret(tmp_path: Path) -> None:
    from specbench.errors import YamlSyntaxError

    with pytest.raises(YamlSyntaxError) as caught:
        load_matrix(write(tmp_path, "model: m.gguf\narms:\n  a: [-c, 512\n  b: []\n"))
    line, snippet = str(caught.value), caught.value.snippet
    assert "\n" not in line and "matrix.yaml:4:4: not valid YAML:" in line and "at line 3" in line
    text, caret = snippet.splitlines()
    assert text.strip() == "b: []" and caret.index("^") == text.index(":")


def test_a_yaml_error_on_a_line_holding_a_key_shows_no_snippet(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_matrix(write(tmp_path, "model: m.gguf\ncommon_args: [--api-key, sk-abcdef123456\n"))
    assert "sk-abcdef" not in str(caught.value) + getattr(caught.value, "snippet", "")


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('env: {"A=B": "1"}\n', r"env: 'A=B' is not an environment variable name"),
        ('env: {"": "1"}\n', r"env: '' is not an environment variable name"),
        ('env: {X: "a\\0b"}\n', r"env: X: the value holds a NUL byte"),
        ('common_args: ["-c", "4\\0"]\n', r"common_args: argument 2 holds a NUL byte"),
    ],
)
def test_what_exec_cannot_pass_is_refused_naming_the_field(models: Path, extra: str, says: str) -> None:
    text = GOOD.replace('common_args: ["-c", "4096"]\n', "") if "common_args" in extra else GOOD
    with pytest.raises(ConfigError, match=says):
        load_matrix(write(models, text + extra))


def test_a_nul_in_an_arm_argument_names_the_arm_not_the_value(models: Path) -> None:
    text = GOOD.replace("  baseline: []", '  baseline: ["--api-key", "sk-se\\0cret"]')
    with pytest.raises(ConfigError, match=r"arms: baseline: argument 2 holds a NUL byte") as caught:
        load_matrix(write(models, text))
    assert "sk-se" not in str(caught.value)  # the value may be a key: errors are printed


def test_names_and_paths_longer_than_the_kernel_takes_are_refused(models: Path) -> None:
    long_arm = GOOD.replace("draft8", "d" * 65)
    with pytest.raises(ConfigError, match="at most 64 characters"):
        load_matrix(write(models, long_arm))
    with pytest.raises(ConfigError, match=r"model: the path is 5001 bytes long"):
        load_matrix(write(models, GOOD.replace("models/target.gguf", "/" + "m" * 5000)))
    deep = GOOD.replace("workload: {", "workload: {prompt_file: " + "p" * 300 + ", ")
    with pytest.raises(ConfigError, match=r"workload.prompt_file: the path has a part of 300 bytes"):
        load_matrix(write(models, deep))
