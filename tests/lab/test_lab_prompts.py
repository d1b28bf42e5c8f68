"""Lab prompts quoting the target's answer: distinct from their first characters, so no variant
is served from the prompt cache another one left (issue 15: CACHED_PREFILL in the demo)."""

from __future__ import annotations

from specbench.lab.prompts import cycle_prompt

TRUTH = {"answer_text": "abcdefghij"}
TEMPLATE = "user: {}\nassistant:"  # the lab chat template (lab/gguf_model.py): one token per character


def shared_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def test_variants_share_no_more_than_the_template_and_a_bracket() -> None:
    prompts = [TEMPLATE.format(cycle_prompt(TRUTH, 64, variant=i)) for i in range(12)]
    for i, a in enumerate(prompts):
        for b in prompts[i + 1 :]:
            shared = shared_prefix(a, b)
            assert shared <= len("user: [1") and shared < 0.1 * len(a)


def test_the_answer_is_still_quoted_and_the_prompt_ends_with_it() -> None:
    text = cycle_prompt(TRUTH, 16, lead=4, variant=3)
    assert text.startswith("[3] ") and text.endswith("abcdefghij" * 2)
