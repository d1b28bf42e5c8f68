"""Blocks → one self-contained HTML page: CSS inline, plots as base64 PNG, no external assets.

Every string goes through :func:`html.escape` (quotes included), so a model output holding
``<script>`` is shown, never run.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

from specbench.report.page.document import Block, Bullets, Code, Figure, Heading, Para, Table, numeric_columns

# Noto CJK / WenQuanYi after the Latin faces: the browser falls back to them per glyph, so
# Chinese or Japanese model output, prompt ids and arm names show as text, not boxes.
#: CJK fallbacks, also for code blocks: the lab models' vocabulary is CJK code points, and a
#: monospace font without them drew lab prompts as boxes (issue 28).
CJK = (
    '"Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Micro Hei", "Microsoft YaHei", '
    '"PingFang SC", "Hiragino Sans"'
)
FONTS = f'"Noto Sans", "DejaVu Sans", {CJK}, sans-serif'
STYLE = f"""
body {{ font: 15px/1.45 system-ui, {FONTS}; max-width: 1200px; margin: 2em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f2f2f2; }} th.num, td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
caption {{ caption-side: top; text-align: left; font-style: italic; padding-bottom: 4px; }}
pre {{ background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }}
pre, code {{ font-family: ui-monospace, "DejaVu Sans Mono", monospace, {CJK}; }}
figure {{ margin: 1em 0 2em; }} img {{ max-width: 100%; }} figcaption {{ font-style: italic; color: #555; }}
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(tag: str, value: object, numeric: bool) -> str:
    """Numbers (and their header) align right, text left: the column decides, not the cell."""
    return f'<{tag} class="num">{esc(value)}</{tag}>' if numeric else f"<{tag}>{esc(value)}</{tag}>"


def table(block: Table) -> str:
    df = block.frame
    numeric = numeric_columns(df)
    caption = f"<caption>{esc(block.caption)}</caption>" if block.caption else ""
    head = "".join(_cell("th", c, n) for c, n in zip(df.columns, numeric, strict=True))
    rows = "".join(
        "<tr>" + "".join(_cell("td", v, n) for v, n in zip(row, numeric, strict=True)) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def figure(block: Figure) -> str:
    """The PNG carries the plot's one title; the caption below says how to read it."""
    data = base64.b64encode(block.path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(block.title)}">'
        f"<figcaption>{esc(block.caption)}</figcaption></figure>"
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
