"""HTTP helpers every engine's ``describe`` and attach mode share: GET a JSON body, a status or a
/metrics scrape, each None when the server does not answer; the two ways a server shows the prompt
its chat template builds, and counts its tokens (llama.cpp's and vLLM's). Their own module, so the engines
(vllm.py, sglang.py) and attach mode (openai.py) import them without importing each other."""

from __future__ import annotations

from typing import Any

from specbench.engines.metrics import MetricSamples, parse_metrics
from specbench.errors import ClientError
from specbench.transport import Http


async def get_json(client: Http, url: str) -> Any | None:
    """GET ``url`` → parsed JSON, or None for any failure: describe must report what a server
    offers, and a missing endpoint (older version, dev-only route) is information, not an error."""
    try:
        resp = await client.get(url)
    except ClientError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


async def get_status(client: Http, url: str) -> int | None:
    """HTTP status of a GET (None when nothing answered): readiness without parsing a body."""
    try:
        return (await client.get(url)).status_code
    except ClientError:
        return None


async def get_metrics(client: Http, base_url: str) -> MetricSamples | None:
    """One /metrics scrape parsed with prometheus_client's parser; None if unavailable
    (llama.cpp answers 501 without ``--metrics``)."""
    try:
        resp = await client.get(f"{base_url}/metrics")
    except ClientError:
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


#: A rendered prompt: its text and the endpoint(s) that read it (``via``).
Rendered = dict[str, str]


async def post_json(client: Http, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """POST ``body`` → the JSON object answered, or None for any failure (no server, another
    status, not JSON, not an object): the prompt helpers below ask optional endpoints."""
    try:
        resp = await client.post(url, json=body)
    except ClientError:
        return None
    if resp.status_code != 200:
        return None
    try:
        data = resp.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _chat(messages: list[dict[str, Any]], tools: list[Any] | None) -> dict[str, Any]:
    return {"messages": messages, **({"tools": tools} if tools else {})}


async def apply_template(
    client: Http, base_url: str, messages: list[dict[str, Any]], tools: list[Any] | None
) -> Rendered | None:
    """llama.cpp: ``POST /apply-template`` answers the prompt text itself. None when it refuses
    (tools on a llama-server started without ``--jinja``) or is not there."""
    data = await post_json(client, f"{base_url}/apply-template", _chat(messages, tools))
    prompt = data.get("prompt") if data else None
    return {"text": prompt, "via": "/apply-template"} if isinstance(prompt, str) else None


async def tokenize_roundtrip(
    client: Http, base_url: str, messages: list[dict[str, Any]], tools: list[Any] | None
) -> Rendered | None:
    """vLLM: ``POST /tokenize`` takes the chat ``messages`` (template applied) and answers tokens and
    a ``count``; ``/detokenize`` turns those tokens back into the prompt text. None otherwise."""
    data = await post_json(client, f"{base_url}/tokenize", _chat(messages, tools))
    if not data or "count" not in data or "tokens" not in data:
        return None
    back = await post_json(client, f"{base_url}/detokenize", {"tokens": data["tokens"]})
    prompt = back.get("prompt") if back else None
    return {"text": prompt, "via": "/tokenize + /detokenize"} if isinstance(prompt, str) else None


async def template_token_count(client: Http, base_url: str, messages: list[dict[str, Any]]) -> int | None:
    """llama.cpp: ``POST /apply-template`` builds the prompt, ``POST /tokenize`` counts it with
    special tokens added and parsed (the template's own markers are single tokens, as when served).
    None when either endpoint refuses or is not there."""
    rendered = await apply_template(client, base_url, messages, None)
    if rendered is None:
        return None
    body = {"content": rendered["text"], "add_special": True, "parse_special": True}
    data = await post_json(client, f"{base_url}/tokenize", body)
    tokens = data.get("tokens") if data else None
    return len(tokens) if isinstance(tokens, list) else None


async def tokenize_count(client: Http, base_url: str, messages: list[dict[str, Any]]) -> int | None:
    """vLLM: ``POST /tokenize`` with the chat ``messages`` applies the template itself (generation
    prompt added, no extra BOS: vLLM's defaults, as for a chat request) and answers a ``count``
    (vllm/entrypoints/serve/tokenize/protocol.py). None otherwise."""
    data = await post_json(client, f"{base_url}/tokenize", _chat(messages, None))
    if not data or "count" not in data:
        return None
    try:
        return int(data["count"])
    except (TypeError, ValueError):
        return None
