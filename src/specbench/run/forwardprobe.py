"""The forward-pass probe: how long the target takes to process T tokens in one pass.

Verifying K drafted tokens is one target pass over K+1 tokens, so the speedup hinges on
v(K+1) = t(K+1) / t(1). A roofline can only guess that ratio: CPU and GPU matmul kernels switch
at batch-size thresholds (on the lab's 471 MB f16 model on 2 cores, t(5) is 1.7 × t(1) and
t(6) is 2.8 × t(1)). So the runner measures it, in the baseline arm, once the cell's measured
requests and its "after" /metrics scrape are done (so it neither warms the baseline more than
the other arms nor touches the counters)::

    for rep in 1..reps, for T in sizes:  prefill T fresh tokens (no prompt cache), 1 output token
    sample = the server's own prefill time for those T tokens (llama.cpp: timings.prompt_ms)

The samples are stored raw in the cell (``cells.jsonl``, key ``forward_probe``); the theory takes
the median per T over every repeat (:func:`forward_curve`). Engines without a way to time a
prefill server-side return no probe request and the cell gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specbench.engines.base import Engine
from specbench.errors import ClientError
from specbench.transport import Http

PROBE_VERSION = 1
# K+1 for K = 0..8 and the usual long drafts (12, 16, 24, 32, 48, 64), with both sides of the
# pinned llama.cpp CUDA backend's kernel switches (ggml-cuda.cu ggml_cuda_mul_mat, by the batch
# ne11): f16/bf16/f32 weights use the vector kernel (mmvf) at 1 token on Ampere and newer, the
# tensor-core mmf kernel up to 16 (mmf.cu: src1_ncols > 16 → no), cuBLAS above; quantized
# weights mmvq up to 8 (MMVQ_MAX_BATCH_SIZE), mmq above. On an H200 the f16 lab pair's pass
# cost 1.4–1.6 steps from 2 to 13 tokens and 3.9 at 17: without 15 and 16 the step's place was
# unknown, and an n-gram arm at n_max 16 verifies exactly 17.
DEFAULT_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 15, 16, 17, 25, 33, 49, 65)
DEFAULT_REPS = 3
# Plain prose the tokenizer splits into ordinary tokens; slices of it are the probe prompts.
_TEXT = (
    "The river bends twice before it reaches the old mill, where the water slows and the path "
    "along the bank turns to gravel. In spring the meadow floods and the herons come back. "
)


async def probe_tokens(client: Http, base_url: str, needed: int) -> list[int]:
    """At least ``needed`` ordinary token ids from the server's tokenizer (ids 1.. if it has none)."""
    try:
        resp = await client.post(f"{base_url}/tokenize", json={"content": _TEXT * 8})
        tokens = [int(t) for t in resp.json()["tokens"]] if resp.status_code == 200 else []
    except (ClientError, ValueError, KeyError, TypeError):
        tokens = []
    if not tokens:
        tokens = list(range(1, 101))
    while len(tokens) < needed:
        tokens = tokens + tokens
    return tokens


async def forward_probe(
    client: Http,
    engine: Engine,
    base_url: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    reps: int = DEFAULT_REPS,
) -> dict[str, Any] | None:
    """Raw prefill timings for every size in ``sizes``, ``reps`` times (None: engine cannot)."""
    if engine.forward_probe_request([1]) is None or not sizes:
        return None
    pool = await probe_tokens(client, base_url, max(sizes) + reps * len(sizes))
    samples: list[dict[str, Any]] = []
    for rep in range(reps):
        for i, size in enumerate(sizes):
            start = (rep * len(sizes) + i) % max(1, len(pool) - size)  # a new slice every time
            samples.append(await _one(client, engine, base_url, pool[start : start + size], rep))
            if "error" in samples[-1]:  # a dead or hung server: 44 more timeouts would say nothing
                return {"version": PROBE_VERSION, "sizes": list(sizes), "reps": reps, "samples": samples,
                        "stopped": f"first failure: {samples[-1]['error']}"}  # fmt: skip
    return {"version": PROBE_VERSION, "sizes": list(sizes), "reps": reps, "samples": samples}


async def _one(client: Http, engine: Engine, base_url: str, tokens: list[int], rep: int) -> dict[str, Any]:
    request = engine.forward_probe_request(tokens)
    assert request is not None
    path, body = request
    sample: dict[str, Any] = {"tokens": len(tokens), "rep": rep}
    try:
        resp = await client.post(f"{base_url}{path}", json=body)
        if not 200 <= resp.status_code < 300:
            sample["error"] = f"HTTP {resp.status_code}: {resp.text[:200]}"
            return sample
        sample.update(engine.forward_probe_result(resp.json()))
    except (ClientError, ValueError) as exc:
        sample["error"] = str(exc) or type(exc).__name__
    return sample
