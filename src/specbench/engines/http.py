"""HTTP helpers every engine's ``describe`` and attach mode share: GET a JSON body, a status or a
/metrics scrape, each None when the server does not answer. Their own module, so the engines
(vllm.py, sglang.py) and attach mode (openai.py) import them without importing each other."""

from __future__ import annotations

from typing import Any

import httpx

from specbench.engines.base import MetricSamples, parse_metrics


async def get_json(client: httpx.AsyncClient, url: str) -> Any | None:
    """GET ``url`` → parsed JSON, or None for any failure: describe must report what a server
    offers, and a missing endpoint (older version, dev-only route) is information, not an error."""
    try:
        resp = await client.get(url)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


async def get_status(client: httpx.AsyncClient, url: str) -> int | None:
    """HTTP status of a GET (None when nothing answered): readiness without parsing a body."""
    try:
        return (await client.get(url)).status_code
    except httpx.HTTPError:
        return None


async def get_metrics(client: httpx.AsyncClient, base_url: str) -> MetricSamples | None:
    """One /metrics scrape parsed with prometheus_client's parser; None if unavailable
    (llama.cpp answers 501 without ``--metrics``)."""
    try:
        resp = await client.get(f"{base_url}/metrics")
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return parse_metrics(resp.text)
    except ValueError:
        return None


def model_cards(body: Any) -> list[dict[str, Any]]:
    """The useful part of a /v1/models answer (id, root, owner, context) from any engine."""
    data = body.get("data") if isinstance(body, dict) else None
    keys = ("id", "root", "owned_by", "max_model_len")
    return [{k: m.get(k) for k in keys if k in m} for m in data or [] if isinstance(m, dict)]
