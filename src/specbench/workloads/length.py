"""Prompts built to a target token count, with the engine's own tokenizer when it has one.

The count is of the whole prompt the server prefills, chat template included. A message may hold
the placeholder ``{{FILL}}``; fitting replaces it with filler text whose length is searched
(secant steps on the measured count) until the prompt lands within 1 % of the target. Without a
placeholder the filler is prepended to the last user message as context. A bundled prompt that
the engine's tokenizer counts longer than the target is cut first (:mod:`.cut`): the user did not
write it, so it is fitted like the rest; a user's own prompt is never cut. Each prompt's filler
starts at its own offset, so different prompts share no long prefix (a shared prefix would be
served from the prompt cache and hide prefill cost, docs/mistakes.md, mistake 11). Without a tokenizer
endpoint the count is estimated (4 characters per token, 4 tokens per message).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from specbench.errors import ConfigError
from specbench.workloads.cut import Counter, cut_to_fit, cuttable
from specbench.workloads.prompts import load_bundled

FILL = "{{FILL}}"
CHARS_PER_TOKEN_ESTIMATE = 4.0
TOLERANCE = 0.01
FIT_TOLERANCE = 0.10  # a fitted prompt further than this from its target is an error
MAX_STEPS = 8


@cache
def filler_source() -> str:
    """Long, natural text: the bundled RAG and summarization passages, in a fixed order."""
    parts = [m[1] for p in load_bundled() if p.category in ("rag", "summarization") for m in p.messages]
    return "\n\n".join(parts)


def filler(n_chars: int, offset: int = 0) -> str:
    """``n_chars`` of natural text starting ``offset`` characters into the source (wrapping)."""
    source = filler_source()
    start = offset % len(source)
    text = (source[start:] + source * (1 + n_chars // len(source)))[: max(n_chars, 0)]
    return text.rsplit(" ", 1)[0] if " " in text[-20:] else text


async def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return round(len(_joined(messages)) / CHARS_PER_TOKEN_ESTIMATE) + 4 * len(messages)


def _with_filler(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    out = [dict(m) for m in messages]
    for msg in out:
        if isinstance(msg.get("content"), str) and FILL in msg["content"]:
            msg["content"] = msg["content"].replace(FILL, text)
            return out
    last_user = max(i for i, m in enumerate(out) if m.get("role") == "user")
    out[last_user]["content"] = (
        f"Context:\n{text}\n\n{out[last_user]['content']}" if text else out[last_user]["content"]
    )
    return out


def _joined(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


async def fit_messages(
    messages: list[dict[str, Any]], target: int, count: Counter, offset: int = 0, chars: int | None = None
) -> tuple[list[dict[str, Any]], int, int]:
    """Messages whose prompt counts ``target`` tokens (±1 %), the count reached, and the filler
    length used. With ``chars`` given, that filler is used as is (requests sharing a document)."""
    if chars is not None:
        text = filler(chars, offset)
        fitted = _with_filler(messages, text)
        tokens = await count(fitted)
        if tokens > (1 + FIT_TOLERANCE) * target and cuttable(messages) is not None:
            cut, tokens = await cut_to_fit(messages, target, count, lambda m: _with_filler(m, text))
            fitted = _with_filler(cut, text)
        return fitted, tokens, chars
    base = await count(_with_filler(messages, ""))
    if base > target and cuttable(messages) is not None:  # a shipped prompt: cut, then fill
        messages, base = await cut_to_fit(messages, target, count, lambda m: _with_filler(m, ""))
    if base >= target:
        return _with_filler(messages, ""), base, 0
    chars = int((target - base) * CHARS_PER_TOKEN_ESTIMATE)
    fitted, tokens = messages, base
    for _ in range(MAX_STEPS):
        fitted = _with_filler(messages, filler(chars, offset))
        tokens = await count(fitted)
        if abs(tokens - target) <= TOLERANCE * target:
            break
        chars = max(1, int(chars * (target - base) / max(tokens - base, 1)))
    return fitted, tokens, chars


def check_fit(prompt_id: str, target: int, tokens: int) -> None:
    """A fitted prompt that misses its target by more than :data:`FIT_TOLERANCE` (either way)
    measures another length than the one reported: stop with the prompt, the target and the count."""
    if abs(tokens - target) <= FIT_TOLERANCE * target:
        return
    if tokens > target:
        why = "the prompt as written is already longer; raise workload.input_tokens or shorten it"
    else:
        why = "the chat template does not grow with the text (does it drop the message content?)"
    raise ConfigError(
        f"workload.input_tokens: prompt {prompt_id!r} fitted to {tokens} tokens, target {target} "
        f"(tolerance ±{FIT_TOLERANCE:.0%}): {why}"
    )
