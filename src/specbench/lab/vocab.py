"""The lab tokenizer (SentencePiece-style, one character per token) and the designed token maps.

One character per token keeps tokenisation unambiguous: any text made of cycle characters
tokenises back to exactly the tokens it was made from, which the n-gram prompt helper relies on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNK, BOS, EOS = 0, 1, 2
N_SPECIAL = 3
N_BYTES = 256
FIRST_NORMAL = N_SPECIAL + N_BYTES
SPACE = "\u2581"  # SentencePiece's visible space

# Printable ASCII (space as U+2581) first, then CJK ideographs: each a single printable
# character, so generated text is valid UTF-8 and every token is one symbol.
_ASCII = [SPACE] + [chr(c) for c in range(33, 127)]
_CJK_START = 0x4E00


def normal_pieces(n_extra: int) -> list[str]:
    """The printable token texts: 95 ASCII characters then ``n_extra`` CJK ideographs."""
    return _ASCII + [chr(_CJK_START + i) for i in range(n_extra)]


@dataclass(frozen=True)
class Vocab:
    """Token texts, scores and types as GGUF wants them."""

    pieces: list[str]
    types: list[int]
    bos: int = BOS
    eos: int = EOS

    @property
    def size(self) -> int:
        return len(self.pieces)

    @property
    def normal_ids(self) -> range:
        return range(FIRST_NORMAL, self.size)


def build_vocab(n_extra: int) -> Vocab:
    """Specials (unk, bos, eos), 256 byte-fallback tokens, then printable single characters."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(N_BYTES)]
    types = [2, 3, 3] + [6] * N_BYTES  # gguf.TokenType: UNKNOWN=2, CONTROL=3, BYTE=6
    normal = normal_pieces(n_extra)
    return Vocab(pieces=pieces + normal, types=types + [1] * len(normal))


def token_text(piece: str) -> str:
    """What a normal token decodes to."""
    return piece.replace(SPACE, " ")


@dataclass(frozen=True)
class TokenMaps:
    """The designed next-token maps.

    ``target[t]`` is the target's greedy successor of token ``t``; ``draft[t]`` the draft's.
    ``cycle`` lists the normal tokens in the order the target walks them; ``agree[t]`` is
    True where the draft proposes the target's successor.
    """

    cycle: list[int]
    target: list[int]
    draft: list[int]
    agree: list[bool]

    @property
    def alpha_realised(self) -> float:
        return float(np.mean([self.agree[t] for t in self.cycle]))


def design_maps(vocab: Vocab, alpha: float, seed: int) -> TokenMaps:
    """A random single cycle over all normal tokens, and a draft agreeing on exactly round(α·n) of them.

    Non-normal tokens (specials, bytes) lead into the cycle, so generation never emits EOS.
    A disagreeing draft proposes the successor's successor: always a wrong, printable token.
    """
    rng = np.random.default_rng(seed)
    cycle = [int(t) for t in rng.permutation(np.array(vocab.normal_ids))]
    target = [cycle[0]] * vocab.size
    for i, tok in enumerate(cycle):
        target[tok] = cycle[(i + 1) % len(cycle)]
    n_agree = round(alpha * len(cycle))
    agree_set = {int(t) for t in rng.choice(np.array(cycle), size=n_agree, replace=False)}
    agree = [t in agree_set for t in range(vocab.size)]
    draft = [target[t] if agree[t] else target[target[t]] for t in range(vocab.size)]
    return TokenMaps(cycle=cycle, target=target, draft=draft, agree=agree)


def cycle_text(vocab: Vocab, maps: TokenMaps, start: int, length: int) -> str:
    """Text of ``length`` cycle tokens beginning with the target's successor of token ``start``."""
    out: list[str] = []
    tok = start
    for _ in range(length):
        tok = maps.target[tok]
        out.append(token_text(vocab.pieces[tok]))
    return "".join(out)
