"""The report as a list of plain blocks, rendered twice (Markdown and HTML) from one source.

Blocks hold plain text only — no inline markup — so each renderer escapes every string the
same way, and a model output or prompt category can never inject markup into either format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """Cells are shown as ``str(value)``: format numbers before building the table."""

    frame: pd.DataFrame
    caption: str = ""


@dataclass(frozen=True)
class Code:
    text: str
    lang: str = "console"  # the Markdown fence's info string


@dataclass(frozen=True)
class Figure:
    """A PNG already written to ``path``; Markdown links it, HTML inlines it."""

    path: Path
    title: str
    caption: str


Block = Heading | Para | Bullets | Table | Code | Figure

# A number as the tables print it: "24", "1.42×", "45 %", "30.1 (29.0–31.2)", "200 → 1000".
_NUMBER = re.compile(r"[-−+]?(\d[\d,]*(\.\d+)?|\.\d+)(e[-+]?\d+)?[\d.,\s()×%–→+−-]*")
_BLANK = frozenset({"", "—", "-", "nan", "None"})


def is_number(value: object) -> bool:
    """Whether a cell reads as a number (booleans and prose do not)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return _NUMBER.fullmatch(str(value).strip()) is not None


def numeric_columns(frame: pd.DataFrame) -> list[bool]:
    """Per column: right-align it (numbers) or not (text). A column is numeric when it has a
    number and every other cell is blank ("—"): one word among numbers makes it text, so a
    header never sits on the other side of its column."""
    out = []
    for column in range(frame.shape[1]):
        cells = [v for v in frame.iloc[:, column] if str(v).strip() not in _BLANK]
        out.append(bool(cells) and all(is_number(v) for v in cells))
    return out
