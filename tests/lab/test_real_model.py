"""The real model (Gemma 3 270M base) on the real llama-server, with real text.

Short on purpose: one thread, few prompts, at most 64 tokens. Run under the engine lock when
other sessions share the machine (``flock /tmp/specbench-engine.lock pytest ...``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench import api
from specbench.analysis import comparisons, load_run
from specbench.cli.demo import REAL_PROMPTS, real_arms
from specbench.lab.real import GEMMA3_270M, server_args, template_path
from tests.support.serve import content, serve

pytestmark = pytest.mark.engine

PROMPTS = {p["id"]: p for p in map(json.loads, REAL_PROMPTS.read_text().splitlines())}
CODE_EDIT = PROMPTS["code-edit-rename"]["prompt"]
# A few words with nothing to copy: 12 greedy tokens after them repeat no 4-token key (measured;
# at 32 tokens the base model starts to loop and ngram-simple drafts even here).
NEVER_MATCHES = "Name three colours:"
NEVER_TOKENS = 12


def one_thread(*extra: str) -> list[str]:
    # Launched here without a matrix: the bundled template by its path, as the matrix resolves it.
    template = template_path(GEMMA3_270M)
    assert server_args(GEMMA3_270M)[-1] == f"specbench:{GEMMA3_270M.template}" and template is not None
    return ["-t", "1", "--jinja", "--chat-template-file", str(template), *extra]


def test_greedy_output_is_deterministic_across_launches(
    llama_server: Path, gemma: Path, tmp_path: Path
) -> None:
    texts = []
    for launch in range(2):
        with serve(llama_server, gemma, one_thread(), tmp_path / f"log{launch}") as srv:
            texts.append(content(srv.complete(PROMPTS["prose-story"]["prompt"], 32)))
    assert texts[0] == texts[1]
    assert len(texts[0].split()) >= 10, texts[0]  # real words, not an empty or one-token reply


@pytest.mark.parametrize("arm", ["ngram-simple", "ngram-mod"])
def test_ngram_drafts_and_accepts_when_the_answer_copies_the_prompt(
    llama_server: Path, gemma: Path, tmp_path: Path, arm: str
) -> None:
    with serve(llama_server, gemma, one_thread(*real_arms()[arm]), tmp_path / "log") as srv:
        reply = srv.complete(CODE_EDIT, 64)
    # A base model continues the text: here it writes the function out again (real code, copied).
    assert content(reply).startswith("def total_price(")
    timings = reply["timings"]
    assert timings["draft_n"] > 0, f"{arm} drafted nothing on a prompt its answer copies"
    assert timings["draft_n_accepted"] > 0


def write_run(folder: Path, gemma: Path) -> Path:
    rows = [
        {"id": "code-edit", "category": "code-edit", "prompt": CODE_EDIT},
        {"id": "never", "category": "prose", "prompt": NEVER_MATCHES},
    ]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    arms = {
        "baseline": [],
        "ngram-simple": real_arms()["ngram-simple"],
        "self-draft": ["-md", str(gemma), "--spec-type", "draft-simple", "--spec-draft-n-max", "4"],
    }
    matrix = {
        "engine": "llamacpp",
        "model": str(gemma),
        "common_args": ["-c", "2048", "-np", "1", *one_thread()],
        "arms": arms,
        "workload": {"suite": "natural", "max_tokens": NEVER_TOKENS, "prompt_file": "prompts.jsonl"},
        "repeats": 2,
        "warmup": 0,
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(matrix))
    return folder / "matrix.yaml"


def test_a_run_on_real_text(llama_server: Path, gemma: Path, tmp_path: Path) -> None:
    """The whole pipeline: real tokens, acceptance counters, a comparison, a drafter that
    proposed nothing reported as such, and self-draft recognised from the files' hashes."""
    runner = api.prepare_run(write_run(tmp_path, gemma), tmp_path / "run", llama_server=str(llama_server))
    runner.run()
    run = load_run(tmp_path / "run")
    df = run.df[~run.df["warmup"]]
    assert (df["output_tokens"] > 0).all()
    drafted = df[df["arm"] == "ngram-simple"].groupby("prompt_id")["draft_n"].sum()
    assert drafted["code-edit"] > 0
    assert drafted["never"] == 0, "a prompt with nothing to copy must show zero drafted tokens"
    self_draft = df[df["arm"] == "self-draft"]
    assert self_draft["draft_accepted"].sum() / self_draft["draft_n"].sum() >= 0.9
    assert set(comparisons(run)) == {"ngram-simple", "self-draft"}
    files = json.loads((tmp_path / "run" / "env.json").read_text())["arm_files"]
    drafts = [f for f in files["self-draft"] if f["flag"] == "-md"]
    assert [f["same_as_target"] for f in drafts] == [True]
