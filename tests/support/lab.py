"""A lab target/draft pair (``specbench lab make``) and its ground truth, made once into the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair


class Pair:
    """A lab target/draft pair and its ground truth."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.target = folder / "target.gguf"
        self.draft = folder / "draft.gguf"
        self.truth: dict[str, Any] = json.loads((folder / "truth.json").read_text())

    def answer(self, n_chars: int) -> str:
        text = self.truth["answer_text"]
        return (text * (1 + n_chars // len(text)))[:n_chars]


def lab_pair(**kwargs: Any) -> Pair:
    return Pair(cached_pair(LabSpec(**kwargs), lab_dir()))
