"""An already running OpenAI-compatible server (attach mode): nothing to launch."""

from __future__ import annotations

from typing import Any

import httpx

from specbench.engines.base import Engine, MetricSamples, sum_series


class AttachedEngine(Engine):
    """Measures whatever answers at the URL; speculative counters are feature-detected."""

    kind = "openai"
    launches = False

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return []

    async def describe(self, client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
        info: dict[str, Any] = {}
        for path in ("/v1/models", "/version", "/props"):
            try:
                resp = await client.get(base_url + path)
            except httpx.HTTPError:
                continue
            if resp.status_code == 200 and "json" in resp.headers.get("content-type", ""):
                info[path.strip("/").replace("/", "_")] = resp.json()
        return info

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        for prefix in ("llamacpp:", "vllm:"):
            drafts = sum_series(samples, prefix + "spec_decode_num_drafts_total")
            if drafts is not None:
                return {
                    "drafts": drafts,
                    "draft_tokens": sum_series(samples, prefix + "spec_decode_num_draft_tokens_total") or 0.0,
                    "accepted": sum_series(samples, prefix + "spec_decode_num_accepted_tokens_total") or 0.0,
                }
        return {}
