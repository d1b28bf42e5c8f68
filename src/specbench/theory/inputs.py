"""What every prediction takes in: a model's weights as stored, and the checked K, C and context.

Its own module so that :mod:`.calibrate` (which fits efficiency to a baseline) and :mod:`.predict`
(which calls it for ``baseline_tok_s``) both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture

__all__ = ["Weights", "check_inputs"]


@dataclass(frozen=True)
class Weights:
    """A model architecture stored at ``bytes_per_weight`` (``quant`` names the format); its LM
    head at ``head_bytes_per_weight`` where the format keeps the head apart (None: the body's)."""

    arch: Architecture
    bytes_per_weight: float
    quant: str
    head_bytes_per_weight: float | None = None


def check_inputs(draft_max: int, concurrency: int, context: int) -> None:
    """K, C and context each at least 1 (a ConfigError naming the one that is not)."""
    if draft_max < 1:
        raise ConfigError(f"draft_max must be at least 1, got {draft_max}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    if context < 1:
        raise ConfigError(f"context must be at least 1 token, got {context}")
