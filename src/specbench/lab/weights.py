"""Weights that make a transformer follow a designed token map under greedy decoding.

The residual stream carries a random unit code ``e_t`` of the current token, scaled to
unit RMS. Every layer computes real attention and FFN/MoE on random weights, but its output
projection is scaled so each layer moves the residual by about 1 % (``RESIDUAL_NUDGE``): the
compute and memory traffic are those of a real model while the argmax cannot change. The LM
head row of token ``v`` is the sum of the codes of the tokens whose designed successor is
``v``, so ``argmax logits(e_t) = map[t]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specbench.errors import LabError

RESIDUAL_NUDGE = 0.01
LOGIT_GAP = 15.0  # wanted logit gap between the designed successor and the runner-up
MIN_MARGIN = 0.15  # smallest acceptable cosine gap in the noise-free readout

#: Signature shared by :func:`input_projection` and :func:`output_projection`.
MatrixMaker = Callable[[np.random.Generator, int, int], np.ndarray]


def token_codes(rng: np.random.Generator, n_vocab: int, n_embd: int) -> np.ndarray:
    """Random unit vectors, one per token (rows)."""
    codes = rng.standard_normal((n_vocab, n_embd)).astype(np.float32)
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    return codes


def readout(codes: np.ndarray, successor: list[int], designed: range) -> np.ndarray:
    """LM head: row v = Σ codes[t] over designed tokens t with successor[t] == v, scaled for a
    clear argmax. Tokens outside ``designed`` (specials, bytes) get no say in the head.
    """
    ids = np.asarray(designed)
    head = np.zeros_like(codes)
    np.add.at(head, np.asarray(successor)[ids], codes[ids])
    margin = readout_margin(codes[ids], head, [successor[t] for t in ids])
    if margin < MIN_MARGIN:
        raise LabError(f"lab model: designed readout margin {margin:.3f} < {MIN_MARGIN}; raise --n-embd")
    scale = LOGIT_GAP / (margin * np.sqrt(codes.shape[1]))
    out: np.ndarray = (head * scale).astype(np.float32)
    return out


def readout_margin(codes: np.ndarray, head: np.ndarray, successor: list[int]) -> float:
    """Smallest gap, over all tokens, between the designed successor's logit and the best other."""
    logits = codes @ head.T
    rows = np.arange(len(successor))  # one row per designed token, in the order given
    want = logits[rows, successor].copy()
    logits[rows, successor] = -np.inf
    return float(np.min(want - logits.max(axis=1)))


def embedding(codes: np.ndarray) -> np.ndarray:
    """Token embeddings: the codes at unit RMS per component."""
    out: np.ndarray = (codes * np.sqrt(codes.shape[1])).astype(np.float32)
    return out


def random_matrix(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    out: np.ndarray = (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float32)
    return out


def input_projection(rng: np.random.Generator, rows: int, n_in: int) -> np.ndarray:
    """Q/K/V, gate/up: unit-variance outputs for a unit-RMS input."""
    return random_matrix(rng, rows, n_in, 1.0 / np.sqrt(n_in))


def output_projection(rng: np.random.Generator, n_out: int, n_in: int) -> np.ndarray:
    """attn_output / ffn_down: moves a unit-RMS residual by about RESIDUAL_NUDGE (relative norm)."""
    return random_matrix(rng, n_out, n_in, RESIDUAL_NUDGE / np.sqrt(n_in))
