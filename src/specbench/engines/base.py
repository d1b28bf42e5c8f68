"""The engine seam: what differs between llama.cpp, vLLM, SGLang and an attached server.

An :class:`Engine` knows how to spell a command line, which flags are speculative, how to
ask a running server what it is, and how to read its speculative counters. Everything else —
launching, health, teardown, requests, storage — is shared and lives elsewhere, in the way
httpx transports plug into one client.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

MetricSamples = dict[str, float]


class Engine(ABC):
    """One inference engine. Subclasses are small; state lives in the runner."""

    kind: ClassVar[str]
    #: Flags that configure speculation; any other difference between arms is a confound.
    spec_flags: ClassVar[frozenset[str]] = frozenset()
    #: Flags whose next argv item is their value (so confound checks pair them correctly).
    health_path: ClassVar[str] = "/health"
    launches: ClassVar[bool] = True

    @abstractmethod
    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        """argv (a list, never a shell string) that serves ``model`` with ``args``."""

    def version(self) -> dict[str, Any]:
        """Version and commit of the engine binary, without a server running."""
        return {}

    async def describe(self, client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
        """What a running server says about itself: build, model, speculation state."""
        return {}

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        """Engine-specific fields added to every chat-completions body."""
        return {}

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        """Speculative counters (drafts, draft_tokens, accepted) from one /metrics scrape."""
        return {}

    def fallback_patterns(self) -> list[str]:
        """Log substrings that mean speculation failed or silently degraded."""
        return []


def parse_metrics(text: str) -> MetricSamples:
    """Prometheus text → ``{'name{label="v"}': value}`` with prometheus_client's parser."""
    out: MetricSamples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


def sum_series(samples: MetricSamples, name: str) -> float | None:
    """Sum a metric over all its label sets (several engines/ranks); None if absent."""
    values = [v for k, v in samples.items() if k == name or k.startswith(name + "{")]
    return sum(values) if values else None


async def count_tokens(client: httpx.AsyncClient, base_url: str, text: str) -> int | None:
    """Tokens in ``text`` by the server's own tokenizer: llama.cpp ``{"content"}`` → ``tokens``;
    vLLM/SGLang ``{"prompt"}`` → ``count`` or ``tokens``. None when the server has no /tokenize."""
    for body in ({"content": text, "add_special": False}, {"prompt": text, "add_special_tokens": False}):
        try:
            resp = await client.post(f"{base_url}/tokenize", json=body)
        except httpx.HTTPError:
            return None
        if resp.status_code == 200:
            data = resp.json()
            if "count" in data:
                return int(data["count"])
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
    return None
