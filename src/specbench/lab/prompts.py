"""Prompts for lab models: text containing a stretch of the target's cycle, so n-gram methods
(ngram-simple, ngram-mod, prompt lookup) find their continuation in the context — known hits."""

from __future__ import annotations

from typing import Any


def cycle_prompt(truth: dict[str, Any], n_tokens: int, lead: int = 8, variant: int = 0) -> str:
    """A request quoting the answer the target will give, ``n_tokens`` + ``lead`` characters of it
    (one lab token per character), so a lookup drafter matches from the first tokens on.

    The variant comes first: a server's prompt cache reuses the longest common *prefix*, so
    variants that differed only at the end shared 115 of 127 tokens and were served from cache
    (CACHED_PREFILL). The lab target's answer depends on the template's last token only, so
    where the variant stands does not change it."""
    answer: str = truth["answer_text"]
    stretch = (answer * (1 + (n_tokens + lead) // len(answer)))[: n_tokens + lead]
    return f"[{variant}] Repeat this text exactly:\n{stretch}"
