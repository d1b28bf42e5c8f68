"""Synthetic GGUF models whose greedy output is designed, so measurements have ground truth.

The target's greedy next token follows a single long cycle over printable tokens; a draft
agrees with it on a chosen fraction α of tokens. See ``docs/lab.md``. Beside the flow: it hands
``run`` and the tests model files (and their ``truth.json``) to measure, and real small models
fetched into the cache.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.lab import acceptance as acceptance
    from specbench.lab import check as check
    from specbench.lab import gguf_model as gguf_model
    from specbench.lab import hf_make as hf_make
    from specbench.lab import hf_model as hf_model
    from specbench.lab import make as make
    from specbench.lab import prompts as prompts
    from specbench.lab import real as real
    from specbench.lab import vocab as vocab
    from specbench.lab import weights as weights

# The package's modules. Importing the package loads none of them (each loads on first use), so
# importing one module never pays for its siblings.
__all__ = [
    "acceptance",
    "check",
    "gguf_model",
    "hf_make",
    "hf_model",
    "make",
    "prompts",
    "real",
    "vocab",
    "weights",
]

if not TYPE_CHECKING:  # mypy sees the imports above; at run time each module loads on first use

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
