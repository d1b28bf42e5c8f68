"""Bundled prompts fit every model (issue 28, item 6): a bundled prompt that a small-vocabulary
tokenizer counts longer than the suite's target is cut where its design allows (the material
between its instruction and its question) and filled to the target; a user's prompt never is."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from specbench.errors import ConfigError
from specbench.matrix.config import Matrix
from specbench.workloads.cut import cut_note, cut_share, layout
from specbench.workloads.length import check_fit, fit_messages
from specbench.workloads.prompts import load_bundled
from specbench.workloads.suites import build_requests


async def one_token_per_character(messages: list[dict[str, Any]]) -> int:
    """The lab models' tokenizer: one token per character, plus a few for the chat template."""
    return sum(len(m["content"]) for m in messages) + 5 * len(messages)


def bundled(prompt_id: str) -> list[dict[str, str]]:
    return next(p for p in load_bundled() if p.id == prompt_id).as_messages()


def fit(messages: list[dict[str, Any]], target: int) -> tuple[list[dict[str, Any]], int]:
    fitted, tokens, _ = asyncio.run(fit_messages(messages, target, one_token_per_character))
    return fitted, tokens


def test_the_repetitive_prompt_that_stopped_the_lab_run_is_cut_and_fitted() -> None:
    # 'repetitive-03' fitted to 639 tokens against 512 on the lab pair: the run ended.
    original = bundled("repetitive-03")
    fitted, tokens = fit(original, 512)
    check_fit("repetitive-03", 512, tokens)  # within tolerance: no error
    assert abs(tokens - 512) <= 0.01 * 512 + 1
    text = fitted[-1]["content"]
    instruction = original[-1]["content"].split("\n\n")[0]
    assert instruction in text and "- 6 eggs" in text  # the instruction and the list's head stay
    share = cut_share(original[-1]["content"], text)
    assert share is not None and 0.3 < share < 1.0
    kept = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert all(ln in original[-1]["content"].splitlines() for ln in kept)  # whole lines only


def test_a_document_prompt_keeps_its_question_and_a_code_prompt_its_closing_fence() -> None:
    rag = bundled("rag-02")
    fitted, tokens = fit(rag, 600)
    check_fit("rag-02", 600, tokens)
    question = rag[-1]["content"].split("\n\n")[-1]
    assert fitted[-1]["content"].endswith(question)
    code = bundled("repetitive-08")
    fitted, tokens = fit(code, 512)
    check_fit("repetitive-08", 512, tokens)
    assert fitted[-1]["content"].rstrip().endswith("```")
    assert layout(code[-1]["content"])[2] == "\n```"


def test_a_users_own_prompt_is_never_cut() -> None:
    mine = [{"role": "user", "content": "Rewrite this: " + "word " * 200}]
    fitted, tokens = fit(mine, 512)
    assert fitted == mine and tokens > 512 * 1.1
    with pytest.raises(ConfigError, match="already longer"):
        check_fit("mine-1", 512, tokens)


def test_a_continued_run_says_which_bundled_prompts_were_cut_and_how_much() -> None:
    matrix = Matrix.model_validate({"model": "m.gguf", "workload": {"suite": "single", "prompts": 10}})
    requests, _, _ = build_requests(matrix, Path("."))
    fitted = {}
    for req in requests:
        messages, tokens = fit(list(req.messages), req.target_tokens or 0)
        fitted[req.prompt_id] = {"messages": messages, "tokens": tokens}
    note = cut_note(requests, fitted)
    longest = max(requests, key=lambda r: len(str(r.messages)))
    assert note is not None and f"{longest.prompt_id} (kept " in note, note
    assert cut_note(requests, {}) is None
