"""Designed acceptance: what the server should report for a draft agreeing on a fraction α.

With per-token agreement α (i.i.d.) and a draft of K tokens, verification accepts the longest
agreeing prefix, so the number of accepted tokens ``a`` per verify step has

    P(a >= i) = α^i,  E[a] = Σ_{i=1..K} α^i = α (1 − α^K) / (1 − α)

The server-style ratio accepted/drafted (llama.cpp ``draft_n_accepted / draft_n``) is then

    X = E[a] / K

and the mean accepted length including the bonus token is ``1 + E[a]`` (Leviathan et al.).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.lab.vocab import TokenMaps


def expected_accepted(alpha: float, k: int) -> float:
    """E[a] = Σ_{i=1..K} α^i, accepted draft tokens per verify step."""
    return sum(alpha**i for i in range(1, k + 1))


def designed_acceptance(alpha: float, k: int) -> float:
    """X = E[a] / K: accepted per drafted token, the ratio llama-server reports."""
    return expected_accepted(alpha, k) / k


def mean_accepted_length(alpha: float, k: int) -> float:
    """1 + E[a]: tokens emitted per verify step, bonus token included."""
    return 1.0 + expected_accepted(alpha, k)


@dataclass(frozen=True)
class DraftCounts:
    drafted: int
    accepted: int
    steps: int

    @property
    def ratio(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


def simulate_request(
    maps: TokenMaps, last_prompt_token: int, max_tokens: int, k: int, checkpoints: bool = False
) -> DraftCounts:
    """Walk the designed maps the way llama-server drafts: the first token comes from the
    prompt; then each step drafts ``min(K, remaining − 1)`` tokens and accepts the agreeing prefix.

    ``checkpoints``: a target whose memory cannot drop a partial sequence (a hybrid/recurrent
    model, ``speculative decoding will use checkpoints``). On a partial acceptance llama-server
    restores the recurrent-state checkpoint and re-decodes the accepted tokens plus the correction
    as a replayed draft; that pass also yields a bonus token, so the next draft starts one token
    later than on a plain KV cache (counters: the replay adds no drafted tokens and the accepted
    ones are counted once).
    """
    tok = maps.target[last_prompt_token]
    n_gen, drafted, accepted, steps = 1, 0, 0, 0
    while n_gen < max_tokens:
        n_draft = min(k, max_tokens - n_gen - 1)
        a = 0
        while a < n_draft and maps.agree[tok]:
            tok = maps.target[tok]
            a += 1
        tok = maps.target[tok]
        if n_draft > 0:
            drafted, accepted, steps = drafted + n_draft, accepted + a, steps + 1
        n_gen += a + 1
        if checkpoints and a < n_draft:  # restore + replay: its verification adds a bonus token
            tok = maps.target[tok]
            n_gen += 1
    return DraftCounts(drafted=drafted, accepted=accepted, steps=steps)
