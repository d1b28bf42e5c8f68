"""The "Rendered prompts" section: one request per category as the server's chat template
rendered it (issue #15, item 6), so a template that drops the message, adds a system prompt or
collapses every prompt to a few tokens is visible to the reader, not only to the token count."""

from __future__ import annotations

import pandas as pd

from specbench.report.page.document import Block, Code, Heading, Para

TITLE = "Rendered prompts"
#: Lab prompts look like Chinese and are not (a reader took them for a rendering fault).
LAB_NOTE = (
    "Lab prompts are written in the lab model's own vocabulary: one token per character, drawn from "
    "CJK code points (docs/lab.md). They are not Chinese text; without a CJK font they show as boxes."
)
KEEP = 800  # characters kept at each end of a long prompt: the template sits at the ends


def shorten(text: str, keep: int = KEEP) -> str:
    """``text``, with the middle of a long one cut (fitted prompts run to thousands of characters
    of filler; the template's markers are at the start and the end)."""
    if len(text) <= 2 * keep + 100:
        return text
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n[… {cut} characters cut …]\n{text[-keep:]}"


def prompt_blocks(prompts: pd.DataFrame) -> list[Block]:
    """Nothing for a run without renderings (older runs, imported data, servers without a
    template endpoint): the section then has nothing to show."""
    if prompts.empty:
        return []
    arm, via = prompts["arm"].iloc[0], prompts["via"].iloc[0]
    blocks: list[Block] = [
        Heading(TITLE),
        Para(f"One request per category as the server of arm {arm} rendered it with its chat template "
             f"(read with {via}); long prompts are cut in the middle."),
    ]  # fmt: skip
    if prompts["prompt_id"].astype(str).str.contains("lab-").any():
        blocks.append(Para(LAB_NOTE))
    several = prompts["workload"].nunique() > 1
    for row in prompts.to_dict("records"):
        where = f"{row['workload']} / " if several else ""
        blocks.append(Para(f"{where}{row['category']}: prompt {row['prompt_id']}"))
        blocks.append(Code(shorten(str(row["text"])), "text"))
        if row["differs_in"]:
            blocks.append(Para(f"Rendered differently by arm(s) {', '.join(row['differs_in'])}."))
    return blocks
