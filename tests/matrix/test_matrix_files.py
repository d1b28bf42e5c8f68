"""Item 6 of issue 22: every file a matrix names resolves against the matrix file's folder,
whatever the working directory, for every engine; a missing one names the arm and the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli import app
from specbench.errors import ConfigError
from specbench.matrix.config import Matrix
from specbench.matrix.load import load_matrix

LLAMA = {
    "engine": "llamacpp",
    "model": "models/target.gguf",
    "common_args": ["--chat-template-file", "templates/chat.jinja", "-c", "512"],
    "arms": {"baseline": [], "draft": ["-md", "models/draft.gguf", "--lora=models/adapter.gguf"]},
    "env": {"GGML_SCHED": "./models", "HOME_LIKE": "/not/checked", "PLAIN": "1"},
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A matrix folder with the files LLAMA names, and an unrelated working directory beside it."""
    lab = tmp_path / "lab"
    for name in ("models/target.gguf", "models/draft.gguf", "models/adapter.gguf", "templates/chat.jinja"):
        (lab / name).parent.mkdir(parents=True, exist_ok=True)
        (lab / name).write_text("x")
    (tmp_path / "elsewhere").mkdir()
    return lab


def write(folder: Path, matrix: dict[str, object]) -> Path:
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def load_from(cwd: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> Matrix:
    monkeypatch.chdir(cwd)
    return load_matrix(Path(path.name) if cwd == path.parent else path)


def test_every_file_resolves_the_same_from_any_working_directory(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(folder, LLAMA)
    here = load_from(folder, path, monkeypatch)
    there = load_from(folder.parent / "elsewhere", path, monkeypatch)
    assert here == there
    assert here.model == str(folder / "models/target.gguf")
    assert here.arm_args("draft") == [
        "--chat-template-file", str(folder / "templates/chat.jinja"), "-c", "512",
        "-md", str(folder / "models/draft.gguf"), f"--lora={folder / 'models/adapter.gguf'}",
    ]  # fmt: skip
    assert here.env == {"GGML_SCHED": str(folder / "models"), "HOME_LIKE": "/not/checked", "PLAIN": "1"}


@pytest.mark.parametrize(
    ("where", "flag", "change"),
    [
        (
            "common_args (every arm)",
            "--chat-template-file",
            {"common_args": ["--chat-template-file", "no.jinja"]},
        ),
        ("arms.draft", "-md", {"arms": {"baseline": [], "draft": ["-md", "models/none.gguf"]}}),
        ("arms.draft", "--lora", {"arms": {"baseline": [], "draft": ["--lora=none.gguf"]}}),
        ("model", "", {"model": "models/none.gguf"}),
        ("env.GGML_SCHED", "", {"env": {"GGML_SCHED": "./none"}}),
    ],
)
def test_a_missing_file_names_the_field_and_flag(
    folder: Path, where: str, flag: str, change: dict[str, object]
) -> None:
    path = write(folder, LLAMA | change)
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    message = str(err.value)
    assert message.startswith(f"{where}: {flag}: no such file " if flag else f"{where}: no such file ")
    assert str(folder) in message and "\n" not in message


def test_the_cli_exits_2_with_one_line_before_anything_launches(folder: Path) -> None:
    path = write(folder, LLAMA | {"arms": {"baseline": [], "draft": ["-md", "models/none.gguf"]}})
    result = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--out", str(folder / "out")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: arms.draft: -md: no such file {folder / 'models/none.gguf'} "
        "(relative paths resolve against the matrix file's folder)"
    ]
    assert not (folder / "out").exists()


def test_vllm_resolves_local_paths_in_json_and_flags_and_keeps_hub_ids(folder: Path) -> None:
    (folder / "drafts/eagle").mkdir(parents=True)
    spec = {"method": "eagle", "model": "./drafts/eagle", "num_speculative_tokens": 3}
    matrix = {
        "engine": "vllm",
        "model": "Qwen/Qwen3-8B",  # a hub id: vLLM downloads it
        "common_args": ["--chat-template", "templates/chat.jinja"],
        "arms": {"baseline": [], "eagle": ["--speculative-config", json.dumps(spec)],
                 "hub": ["-sc", json.dumps(spec | {"model": "org/eagle-head"})]},
    }  # fmt: skip
    loaded = load_matrix(write(folder, matrix))
    assert loaded.model == "Qwen/Qwen3-8B"
    assert loaded.common_args == ("--chat-template", str(folder / "templates/chat.jinja"))
    assert json.loads(loaded.arms["eagle"][1])["model"] == str(folder / "drafts/eagle")
    assert json.loads(loaded.arms["hub"][1])["model"] == "org/eagle-head"
    missing = matrix | {"arms": {"baseline": [], "eagle": ["-sc", json.dumps(spec | {"model": "./gone"})]}}
    with pytest.raises(ConfigError, match=r"^arms.eagle: -sc: no such file .*gone"):
        load_matrix(write(folder, missing))


def test_sglang_draft_model_path_is_checked(folder: Path) -> None:
    matrix = {
        "engine": "sglang",
        "model": "./models",
        "arms": {"baseline": [], "eagle": ["--speculative-draft-model-path", "../gone/eagle"]},
    }
    with pytest.raises(ConfigError, match=r"^arms.eagle: --speculative-draft-model-path: no such file"):
        load_matrix(write(folder, matrix))
    matrix["arms"] = {"baseline": [], "eagle": ["--speculative-draft-model-path", "models"]}
    loaded = load_matrix(write(folder, matrix))
    assert loaded.model == loaded.arms["eagle"][1] == str(folder / "models")


def test_a_device_as_model_is_named_as_what_it_is(tmp_path: Path) -> None:
    # /dev/zero was reported as "a folder" (issue 29)
    path = tmp_path / "m.yaml"
    path.write_text("model: /dev/zero\n")
    with pytest.raises(ConfigError, match="model: /dev/zero is a character device, not a regular file"):
        load_matrix(path)
