"""What the theory knows of vLLM, each value fitted once and named with its source; where nothing
public or probed fixes one, it is not given (unknown, with the unknown engine's band). No verify
curve was measured on it yet.

``draft_pass_s`` — vLLM's EAGLE-3 proposer on a GPU, per drafting pass. vllm#20780 (Llama-3.1-8B
BF16, batch 1, H100, TPOT 7.07 ms without speculation) measured EAGLE-3 rounds that cost more than
EAGLE-1's at the same K although the EAGLE-3 head is the smaller one (a 32k-token head against the
full 128k one): TPOT × accepted length gives 10.2 ms at K = 2 against 8.5 ms modelled (the catch-up pass
drafting the first token, theory/methods.py). The head's
shape does not explain it; vllm#17504 ("apply torch.compile & cudagraph to EAGLE3", propose time
16 → 6 ms) shows how much of that engine's EAGLE-3 proposer was host work between the passes.
Fitted once, in closed form, on the K = 2 row of vllm#20780 alone (0.83 ms per pass: the gap
divided by the K passes the proposer runs; 0.87 ms before the head's fc and wider q/k/v
were counted, theory/methods.py); its K = 3–7 rows and every other point are held out
(bench/theory_published.py). EAGLE-1 in the same table needs no such term and gets none; vLLM
on a CPU, SGLang and llama.cpp: unknown, 0.

Band 0.54–0.83 ms: the closed-form value of each K = 2–7 row of vllm#20780.

**Catch-up.** ``EagleProposer.propose`` runs one forward over the verified tokens' hidden states
and drafts the first token from the last of them, then ``num_speculative_tokens − 1`` more
(theory/methods.py): a round runs the catch-up and γ − 1 drafting passes, not γ. Its fused
recurrent kernels read and write a hybrid model's state in place through slot indices (2 moves a
pass, 1 per snapshot: the theory's default).
"""

from __future__ import annotations

from specbench.theory.measured.engines import EngineTerms, HostCost

EAGLE3_DRAFT_PASS_S = 0.83e-3
EAGLE3_SOURCE = "https://github.com/vllm-project/vllm/issues/20780"

HOST_COSTS: tuple[HostCost, ...] = (
    HostCost("gpu", "draft_pass_s", EAGLE3_DRAFT_PASS_S, 0.54e-3, 0.83e-3,
             "vLLM's EAGLE-3 proposer host work per drafting pass", EAGLE3_SOURCE, method="eagle3",
             observed=6),
)  # fmt: skip


def terms(kind: str, name: str) -> EngineTerms:
    """vLLM's terms under the registry's ``kind`` and its display ``name``."""
    return EngineTerms(kind, name, HOST_COSTS, catchup_drafts=True)
