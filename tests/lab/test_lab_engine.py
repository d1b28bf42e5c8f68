"""Lab models on the real llama-server: designed behaviour is what the engine does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specbench.cli.demo import NGRAM_MOD_ARGS
from specbench.lab.acceptance import simulate_request
from specbench.lab.check import CHECK_PROMPTS, run_check
from specbench.lab.vocab import build_vocab, design_maps
from tests.support.lab import Pair, lab_pair
from tests.support.serve import content, draft_args, serve

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("arch", ["dense", "moe", "hybrid"])
def test_greedy_output_follows_the_designed_map(llama_server: Path, tmp_path: Path, arch: str) -> None:
    pair = lab_pair(arch=arch, alpha=0.8)
    with serve(llama_server, pair.target, [], tmp_path / "log") as srv:
        for prompt in ("Hello there.", "Write a poem about the sea."):
            assert content(srv.complete(prompt, 120)) == pair.answer(120)


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9])
@pytest.mark.parametrize("k", [2, 8])
def test_measured_acceptance_matches_design(llama_server: Path, alpha: float, k: int) -> None:
    result = run_check(llama_server, alpha, k, max_tokens=400)
    assert result.greedy_matches, "speculation changed the greedy output"
    assert result.drafted > 100
    assert abs(result.measured - result.designed) <= 0.03, result.line()


def test_moe_pair_serves_with_speculation(llama_server: Path, moe_pair: Pair, tmp_path: Path) -> None:
    with serve(llama_server, moe_pair.target, draft_args(moe_pair.draft, 4), tmp_path / "log") as srv:
        assert all(slot["speculative"] for slot in srv.get("/slots"))
        reply = srv.complete("Explain mixtures of experts.", 300)
    assert content(reply) == moe_pair.answer(300)
    timings = reply["timings"]
    assert timings["draft_n"] > 0
    assert timings["draft_n_accepted"] / timings["draft_n"] == pytest.approx(
        moe_pair.truth["designed_acceptance"]["4"], abs=0.06
    )


def checkpoint_walk(pair: Pair, k: int, max_tokens: int, checkpoints: bool = True) -> tuple[int, int]:
    """(drafted, accepted) that ``simulate_request`` predicts for one lab request."""
    spec = pair.truth["spec"]
    maps = design_maps(build_vocab(spec["n_extra_tokens"]), spec["alpha"], spec["seed"])
    counts = simulate_request(maps, pair.truth["last_template_token"], max_tokens, k, checkpoints)
    return counts.drafted, counts.accepted


@pytest.mark.parametrize(("alpha", "k"), [(0.8, 4), (0.6, 2)])
def test_hybrid_target_acceptance_matches_design(llama_server: Path, alpha: float, k: int) -> None:
    """A qwen35 (Gated DeltaNet + attention) target with the dense draft: the designed
    acceptance, and exactly the counts of the checkpoint-and-replay walk (not the plain one)."""
    result = run_check(llama_server, alpha, k, max_tokens=400, arch="hybrid")
    assert result.greedy_matches, "speculation changed the greedy output"
    assert abs(result.measured - result.designed) <= 0.03, result.line()
    drafted, accepted = checkpoint_walk(lab_pair(arch="hybrid", alpha=alpha), k, 400)
    assert (result.drafted, result.accepted) == (len(CHECK_PROMPTS) * drafted, len(CHECK_PROMPTS) * accepted)


def test_hybrid_target_rolls_back_through_recurrent_state_checkpoints(
    llama_server: Path, tmp_path: Path
) -> None:
    pair = lab_pair(arch="hybrid", alpha=0.8)
    log = tmp_path / "log"
    with serve(llama_server, pair.target, [*draft_args(pair.draft, 4), "-lv", "5"], log) as srv:
        assert all(slot["speculative"] for slot in srv.get("/slots"))
        reply = srv.complete("Explain recurrent state.", 300)
    assert content(reply) == pair.answer(300)
    text = log.read_text()
    # the hybrid memory cannot drop a partial sequence: each round saves the recurrent state
    assert "speculative decoding not supported" not in text
    assert "speculative decoding will use checkpoints" in text
    mib = pair.truth["target"]["recurrent_state_bytes"] / 2**20
    sizes = set(re.findall(r"created speculative checkpoint \(.*size = ([\d.]+) MiB", text))
    assert sizes == {f"{mib:.3f}"}  # the recurrent state truth.json describes, copied per round
    assert text.count("restoring speculative checkpoint") > 10
    timings = reply["timings"]
    assert (timings["draft_n"], timings["draft_n_accepted"]) == checkpoint_walk(pair, 4, 300)
    assert checkpoint_walk(pair, 4, 300) != checkpoint_walk(pair, 4, 300, checkpoints=False)


NGRAM_MOD = list(NGRAM_MOD_ARGS)
NGRAM_SIMPLE = [
    "--spec-type",
    "ngram-simple",
    "--spec-ngram-simple-size-n",
    "4",
    "--spec-ngram-simple-size-m",
    "8",
]


@pytest.mark.parametrize("method", [NGRAM_MOD, NGRAM_SIMPLE], ids=["ngram-mod", "ngram-simple"])
def test_ngram_methods_draft_on_a_prompt_containing_the_cycle(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, method: list[str]
) -> None:
    with serve(llama_server, dense_pair.target, method, tmp_path / "log") as srv:
        miss = srv.complete("Say something.", 200)  # first request: nothing to look up anywhere
        hit = srv.complete("Repeat exactly: " + dense_pair.answer(400), 200)
    assert content(hit) == dense_pair.answer(200) == content(miss)
    assert miss["timings"].get("draft_n", 0) == 0
    assert hit["timings"]["draft_n"] > 50
    assert hit["timings"]["draft_n_accepted"] / hit["timings"]["draft_n"] > 0.8


def test_ngram_mod_learns_across_requests(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    """ngram-mod keeps its n-gram pool between requests (ngram-simple does not): a plain prompt
    drafts once an earlier request generated the same text. Workloads must say which came first."""
    with serve(llama_server, dense_pair.target, NGRAM_MOD, tmp_path / "log") as srv:
        first = srv.complete("Say something.", 200)
        second = srv.complete("Say something else.", 200)
    assert first["timings"].get("draft_n", 0) == 0
    assert second["timings"]["draft_n"] > 50


def test_incompatible_draft_leaves_the_server_running_without_speculation(
    llama_server: Path, tmp_path: Path
) -> None:
    pair = lab_pair(arch="dense", alpha=0.8, incompatible_draft=True)
    log = tmp_path / "log"
    with serve(llama_server, pair.target, draft_args(pair.draft, 4), log) as srv:
        slots = srv.get("/slots")
        reply = srv.complete("Hello.", 64)
    text = log.read_text()
    # What the server says (runner checks rely on these exact lines):
    assert "draft model bos tokens must match target model to use speculation" in text
    assert "failed to initialize speculative decoding context" in text
    assert not any(slot["speculative"] for slot in slots)
    assert "draft_n" not in reply["timings"]
    assert content(reply) == pair.answer(64)
