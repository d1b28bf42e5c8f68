"""Blocks → GitHub-flavoured Markdown.

pandas' ``to_markdown`` needs ``tabulate`` (not a dependency), so the pipe table is built here;
every cell is backslash-escaped so text like ``<script>`` or ``a|b`` stays literal text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from specbench.report.page.document import Block, Bullets, Code, Heading, Para, Table, numeric_columns

_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def escape(text: object) -> str:
    """Literal text in Markdown: CommonMark backslash escapes, newlines folded to ↵."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\r", "").replace("\n", " ↵ ")


def table(block: Table) -> str:
    df = block.frame
    head = "| " + " | ".join(escape(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if n else ":---" for n in numeric_columns(df)) + "|"
    rows = ["| " + " | ".join(escape(v) for v in row) + " |" for row in df.itertuples(index=False)]
    caption = [f"*{escape(block.caption)}*", ""] if block.caption else []
    return "\n".join([*caption, head, rule, *rows])


def code(text: str, lang: str = "console") -> str:
    """A fence longer than any backtick run inside, so the text cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def block(b: Block, base: Path) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + escape(b.text)
    if isinstance(b, Para):
        return escape(b.text)
    if isinstance(b, Bullets):
        return "\n".join("- " + escape(item) for item in b.items)
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Code):
        return code(b.text, b.lang)
    rel = b.path.relative_to(base) if b.path.is_relative_to(base) else b.path
    return f"![{escape(b.title)}]({rel.as_posix()})\n\n*{escape(b.caption)}*"


def render(blocks: Sequence[Block], base: Path) -> str:
    """The document; figure links are relative to ``base`` (the folder the file is written to)."""
    return "\n\n".join(block(b, base) for b in blocks) + "\n"
