"""Does this llama-server honour per-request speculative settings? Ask it, don't assume.

If a server honoured ``speculative.n_max`` (and ``n_min``, ``p_min``, the type, n-gram sizes) per
request, a tune could race those knobs inside one launch instead of one launch per candidate.
The pinned build compiles them out (``tools/server/server-schema.cpp``: an ``#if 0`` block, "to
keep things simple, we disable speculative parameter adjustments for now"), so the same prompt
drafted the same tokens at ``n_max`` 0, 2 and 8. The probe sends one prompt twice, greedy, with
``speculative.n_max`` 1 and then 8, and compares the server's own draft counts
(``timings.draft_n``): a server that honours the setting drafts at most one token per round in
the first request and more in the second; one that ignores it decodes the same tokens the same
way both times and reports the same counts.
"""

from __future__ import annotations

from typing import Any

from specbench.engines.base import Engine
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.errors import ClientError
from specbench.transport import Http

N_MAX = (1, 8)
TOKENS = 48
_PROMPT = "Write a short note about the river, the mill and the herons in spring."


def verdict(drafted: list[float]) -> bool | None:
    """True: the counts differ (honoured); False: equal and non-zero (ignored); None: nothing
    was drafted, so the probe cannot tell."""
    if len(drafted) != len(N_MAX) or not any(drafted):
        return None
    return drafted[0] != drafted[1]


def describe(probe: dict[str, Any] | None) -> str:
    """One line for the plan and the answer."""
    if not probe or "drafted" not in probe:
        return "per-request speculative settings: not probed (each candidate is its own launch)"
    if probe.get("honoured") is None:
        return (
            "per-request speculative settings: unknown (the probe drafted nothing); "
            "each candidate is its own launch"
        )
    if probe["honoured"]:
        return (
            "per-request speculative settings: honoured by this server (speculative.n_max "
            f"{N_MAX[0]} and {N_MAX[1]} drafted {probe['drafted'][0]:g} and {probe['drafted'][1]:g} tokens); "
            "detected, not yet used: each candidate is still its own launch"
        )
    return (
        "per-request speculative settings: ignored by this server (speculative.n_max "
        f"{N_MAX[0]} and {N_MAX[1]} both drafted {probe['drafted'][0]:g} tokens): each candidate needs "
        "its own launch"
    )


async def per_request_probe(client: Http, engine: Engine, base_url: str) -> dict[str, Any] | None:
    """Two greedy requests differing only in ``speculative.n_max``; None for engines without
    per-request draft counts to compare (only llama-server reports them in ``timings``)."""
    if not isinstance(engine, LlamaCppEngine):
        return None
    drafted = []
    for n_max in N_MAX:
        body = {"prompt": _PROMPT, "n_predict": TOKENS, "temperature": 0, "cache_prompt": False,
                "speculative.n_max": n_max}  # fmt: skip
        resp = await client.post(f"{base_url}/completion", json=body)
        if resp.status_code >= 400:
            raise ClientError(f"HTTP {resp.status_code} from {base_url}/completion: {resp.text[:200]}")
        drafted.append(float((resp.json().get("timings") or {}).get("draft_n", 0)))
    return {"n_max": list(N_MAX), "drafted": drafted, "honoured": verdict(drafted)}
