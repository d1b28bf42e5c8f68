"""The report as a list of plain blocks, rendered twice (Markdown and HTML) from one source.

Blocks hold plain text only — no inline markup — so each renderer escapes every string the
same way, and a model output or prompt category can never inject markup into either format.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Figure:
    """A PNG already written to ``path``; Markdown links it, HTML inlines it."""

    path: Path
    title: str
    caption: str


Block = Heading | Para | Bullets | Table | Code | Figure
