"""Bundled prompts cut to a token target, where each prompt's design allows.

The bundled prompts are chosen to leave room for filler under a suite's target with a common
tokenizer (about 4 characters per token, suites._fitting). A small-vocabulary tokenizer (the lab
models count one token per character) counts some of them longer than the target, and the user
did not write them: they are cut, not refused. A user's own prompt is never cut (it is the
workload); missing its target is an error naming it (length.check_fit).

Every bundled prompt is an instruction and its material, in paragraphs: the instruction first
("Summarize this article ...", "Repeat this shopping list ..."), or a labelled document with the
question last ("Document:" ... "What should I do if ..."). The material between is cut from its
end, at a line end (at a word end for prose in few lines), a closing code fence kept, so what is
left is still a whole, answerable prompt: a shorter list to repeat, a shorter article to
summarise. The instruction and the question are never cut.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cache
from typing import Any

from specbench.workloads.prompts import load_bundled

Messages = list[dict[str, Any]]
Counter = Callable[[Messages], Awaitable[int]]
FENCE = "```"
ROOM = 0.03  # cut this far under the target: the filler's own framing needs a few tokens
FEW_LINES = 16  # material in fewer lines is cut at word ends too


@cache
def _bundled_texts() -> frozenset[str]:
    return frozenset(text for p in load_bundled() for _, text in p.messages)


def cuttable(messages: Messages) -> int | None:
    """Index of the longest message that is a bundled prompt's text as shipped, else None."""
    texts = _bundled_texts()
    found = [
        (len(m["content"]), i)
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), str) and m["content"] in texts
    ]
    return max(found)[1] if found else None


def layout(text: str) -> tuple[str, str, str, str]:
    """(head, material, closing, tail) of a bundled prompt: head and tail are kept whole, the
    material is cut from its end, ``closing`` (a code fence) follows whatever is kept of it."""
    parts = text.split("\n\n")
    if len(parts) < 2:
        return "", text, "", ""
    head, rest = parts[0], parts[1:]
    tail = ""
    if head.rstrip().endswith(":") and len(rest) >= 2:  # "Document:" ... the question comes last
        tail, rest = rest[-1], rest[:-1]
    material = "\n\n".join(rest)
    closing = ""
    if material.startswith(FENCE) and material.rstrip().endswith(FENCE):
        material, closing = material.rstrip()[: -len(FENCE)].rstrip("\n"), "\n" + FENCE
    return head, material, closing, tail


def cut_points(material: str) -> list[int]:
    """Where the material may end, shortest first: after a line, or a word in short material."""
    points = [i for i, c in enumerate(material) if c == "\n" and i > 0]
    if len(points) < FEW_LINES:
        points += [i for i, c in enumerate(material) if c == " " and i > 0]
    return sorted(set(points))


def assemble(head: str, material: str, closing: str, tail: str) -> str:
    parts = [p for p in (head, material.rstrip() + closing, tail) if p]
    return "\n\n".join(parts)


async def cut_to_fit(
    messages: Messages, target: int, count: Counter, wrap: Callable[[Messages], Messages] = lambda m: m
) -> tuple[Messages, int]:
    """``messages`` with their bundled text cut so that ``wrap(messages)`` counts at most the
    target less :data:`ROOM`, and that count; the longest such cut (bisection on the count, a
    few tokenizer calls). When even the shortest cut is too long, the shortest is returned:
    length.check_fit then names the prompt."""
    index = cuttable(messages)
    if index is None:
        return messages, await count(wrap(messages))
    head, material, closing, tail = layout(messages[index]["content"])
    points = cut_points(material)
    goal = target - max(2, int(ROOM * target))

    def with_cut(point: int) -> Messages:
        out = [dict(m) for m in messages]
        out[index]["content"] = assemble(head, material[:point], closing, tail)
        return out

    low, high = 0, len(points) - 1
    best: tuple[Messages, int] | None = None
    while low <= high:
        mid = (low + high) // 2
        candidate = with_cut(points[mid])
        tokens = await count(wrap(candidate))
        if tokens <= goal:
            best, low = (candidate, tokens), mid + 1
        else:
            high = mid - 1
    if best is None:
        shortest = with_cut(points[0]) if points else messages
        return shortest, await count(wrap(shortest))
    return best


def cut_share(original: str, fitted: str) -> float | None:
    """How much of a bundled text a fitted prompt kept (0..1), None when it was not cut."""
    if original in fitted:
        return None
    _, material, _, _ = layout(original)
    low, high = 0, len(material)  # a kept prefix's own prefixes are kept too: bisect its length
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if material[:mid].rstrip() in fitted else (low, mid - 1)
    return low / max(len(material), 1)


def cut_note(requests: Sequence[Any], fitted: Mapping[str, Any]) -> str | None:
    """One line naming the bundled prompts a fit cut, and how much of each it kept; None when
    none was. ``requests``: RequestSpecs; ``fitted``: the run directory's fitted prompts."""
    cut = []
    for req in requests:
        entry = fitted.get(req.prompt_id)
        index = cuttable(list(req.messages))
        if not isinstance(entry, Mapping) or index is None or not isinstance(entry.get("messages"), list):
            continue
        messages = entry["messages"]
        text = messages[index].get("content") if index < len(messages) else None
        share = cut_share(req.messages[index]["content"], text) if isinstance(text, str) else None
        if share is not None:
            cut.append(f"{req.prompt_id} (kept {share:.0%} of its material)")
    if not cut:
        return None
    return (
        "bundled prompts cut to fit the target length on this model's tokenizer: "
        + ", ".join(cut)
        + " (their instruction and question kept whole; fitted_prompts.json holds the text sent)"
    )
