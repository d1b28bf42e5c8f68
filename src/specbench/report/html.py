"""Blocks → one self-contained HTML page: CSS inline, plots as base64 PNG, no external assets.

Every string goes through :func:`html.escape` (quotes included), so a model output holding
``<script>`` is shown, never run.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

from specbench.report.document import Block, Bullets, Code, Figure, Heading, Para, Table

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f2f2f2; } td:first-child, th:first-child, td.prose { text-align: left; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 4px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
figure { margin: 1em 0 2em; } img { max-width: 100%; } figcaption { font-style: italic; color: #555; }
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(value: object) -> str:
    """Numbers align right; prose (evidence, reasons) reads better left-aligned."""
    text = esc(value)
    prose = isinstance(value, str) and len(value) > 24 and " " in value
    return f'<td class="prose">{text}</td>' if prose else f"<td>{text}</td>"


def table(block: Table) -> str:
    df = block.frame
    caption = f"<caption>{esc(block.caption)}</caption>" if block.caption else ""
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in df.itertuples(index=False))
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def figure(block: Figure) -> str:
    data = base64.b64encode(block.path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(block.title)}">'
        f"<figcaption>{esc(block.title)}: {esc(block.caption)}</figcaption></figure>"
    )


def block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{esc(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{esc(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Code):
        return f"<pre><code>{esc(b.text)}</code></pre>"
    return figure(b)


def render(blocks: Sequence[Block], title: str) -> str:
    body = "\n".join(block(b) for b in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
