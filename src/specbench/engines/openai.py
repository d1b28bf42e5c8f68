"""The engines specbench launches nothing for: an already running OpenAI-compatible server
(attach mode), and a run imported from another harness.

Attach mode launches nothing, so it must find out which engine answers before it can read that
engine's speculative counters: the three engines name and shape them differently
(see each engine's server docs). :func:`detect_engine` decides from
``/metrics`` first (the metric prefixes are unambiguous) and from version-like endpoints when
metrics are disabled; :class:`AttachedEngine` then delegates to that engine's parsers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from specbench.engines.base import Engine, MetricSamples, Speculation
from specbench.engines.http import (
    apply_template,
    get_json,
    get_metrics,
    model_cards,
    template_token_count,
    tokenize_count,
    tokenize_roundtrip,
)
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.errors import ClientError
from specbench.transport import Http, open_http

#: Engines attach mode can recognise; "openai" means "unknown OpenAI-compatible server".
KNOWN_ENGINES = ("llamacpp", "vllm", "sglang")
UNKNOWN = "openai"

# Metric-name prefixes, from each engine's metrics docs: llama.cpp `llamacpp:`, vLLM `vllm:`,
# SGLang `sglang:`.
_METRIC_PREFIXES = {"llamacpp:": "llamacpp", "vllm:": "vllm", "sglang:": "sglang"}
# /v1/models `owned_by`: "llamacpp" (llama.cpp server) and "vllm" (vLLM serve). SGLang's is not documented.
_OWNERS = {"llamacpp": "llamacpp", "vllm": "vllm"}


# -- detection ---------------------------------------------------------------------------------
def detect_from_metrics(samples: MetricSamples) -> str | None:
    """The engine whose metric prefix appears in a scrape; None when no engine metric is present."""
    for key in samples:
        for prefix, engine in _METRIC_PREFIXES.items():
            if key.startswith(prefix):
                return engine
    return None


def detect_from_models(body: Any) -> str | None:
    """llama.cpp and vLLM name themselves in /v1/models ``owned_by``."""
    owners = {card.get("owned_by") for card in model_cards(body)}
    return next((_OWNERS[o] for o in owners if isinstance(o, str) and o in _OWNERS), None)


def detect_from_server_info(body: Any) -> str | None:
    """SGLang's server info carries ``internal_states`` (SGLang server info); vLLM's dev-mode
    /server_info carries ``vllm_config`` (vLLM serve docs)."""
    if not isinstance(body, dict):
        return None
    if "internal_states" in body:
        return "sglang"
    return "vllm" if "vllm_config" in body else None


async def detect_engine(base_url: str, client: Http | None = None) -> str:
    """Which engine serves ``base_url``: "llamacpp", "vllm", "sglang", or "openai" (unknown).

    Order: /metrics prefixes, /v1/models ``owned_by``, SGLang/vLLM server info, llama.cpp
    /props ``build_info``, and last vLLM /version, because a bare ``{"version"}``
    is the least specific answer.
    """
    if client is None:
        async with open_http(10.0) as own:
            return await detect_engine(base_url, own)
    base = base_url.rstrip("/")
    samples = await get_metrics(client, base)
    found = detect_from_metrics(samples) if samples else None
    found = found or detect_from_models(await get_json(client, f"{base}/v1/models"))
    for path in ("/server_info", "/get_server_info"):
        found = found or detect_from_server_info(await get_json(client, base + path))
    if found is None:
        props = await get_json(client, f"{base}/props")
        found = "llamacpp" if isinstance(props, dict) and "build_info" in props else None
    if found is None:
        version = await get_json(client, f"{base}/version")
        found = "vllm" if isinstance(version, dict) and "version" in version else None
    return found or UNKNOWN


# -- attach mode -------------------------------------------------------------------------------
class AttachedEngine(Engine):
    """Measures whatever answers at the URL; speculative counters are feature-detected.

    ``describe`` (the runner calls it once per cell, before any request) detects the engine and
    caches it; ``spec_counters`` re-detects from each scrape's prefixes, so it is right even when
    called without ``describe``.
    """

    kind = "openai"
    launches = False
    # A server whose engine could not be told: the flags the user describes it with (--arm-args)
    # are read with llama.cpp's spelling, as imported runs are; a detected engine's run is read
    # by that engine (attach_matrix records it as the run's engine).
    spec_flags: ClassVar[frozenset[str]] = LlamaCppEngine.spec_flags
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = LlamaCppEngine.spec_flag_prefixes

    @classmethod
    def disables(cls, flag: str, value: str | None) -> bool:
        return LlamaCppEngine.disables(flag, value)

    def __init__(self, engine: str | None = None, server_version: dict[str, Any] | None = None) -> None:
        self.detected = engine
        self.server_version = server_version or {}

    @property
    def kind_name(self) -> str:
        """The engine that answers (recorded in env.json), "openai" while unknown."""
        return self.detected or UNKNOWN

    def version(self) -> dict[str, Any]:
        """What the server said about its version when attach mode probed it (no binary here)."""
        return dict(self.server_version)

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return []

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        base = base_url.rstrip("/")
        info: dict[str, Any] = {}
        for path in ("/v1/models", "/version", "/props"):
            try:
                resp = await client.get(base + path)
            except ClientError:
                continue
            if resp.status_code == 200 and "json" in resp.headers.get("content-type", ""):
                info[path.strip("/").replace("/", "_")] = resp.json()
        if self.detected is None:
            self.detected = await detect_engine(base, client)
        info["detected_engine"] = self.detected
        delegate = _delegate(self.detected)
        if delegate is not None:
            try:
                info.update(await delegate.describe(client, base))
            except (ClientError, ValueError, KeyError, TypeError) as exc:
                info["describe_error"] = f"{type(exc).__name__}: {exc}"
        return info

    async def render_prompt(
        self,
        client: Http,
        base_url: str,
        messages: list[dict[str, Any]],
        tools: list[Any] | None,
    ) -> dict[str, str] | None:
        """The detected engine's way; while the engine is unknown, llama.cpp's then vLLM's."""
        delegate = _delegate(self.detected)
        if delegate is not None:
            return await delegate.render_prompt(client, base_url, messages, tools)
        found = await apply_template(client, base_url, messages, tools)
        return found if found is not None else await tokenize_roundtrip(client, base_url, messages, tools)

    async def count_prompt_tokens(
        self, client: Http, base_url: str, messages: list[dict[str, Any]]
    ) -> int | None:
        """The detected engine's way; while the engine is unknown, llama.cpp's then vLLM's."""
        delegate = _delegate(self.detected)
        if delegate is not None:
            return await delegate.count_prompt_tokens(client, base_url, messages)
        found = await template_token_count(client, base_url, messages)
        return found if found is not None else await tokenize_count(client, base_url, messages)

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        # Engine-specific fields only once the engine is known: a strict OpenAI server rejects them.
        delegate = _delegate(self.detected)
        return delegate.request_extras(ignore_eos) if delegate is not None else {}

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        delegate = _delegate(detect_from_metrics(samples) or self.detected)
        return delegate.spec_counters(samples) if delegate is not None else {}

    def speculation(self, args: Sequence[str]) -> Speculation | None:
        delegate = _delegate(self.detected)
        return delegate.speculation(args) if delegate is not None else LlamaCppEngine().speculation(args)

    def server_says_off(self, servers: Sequence[Mapping[str, Any]]) -> list[str]:
        delegate = _delegate(self.detected)
        return delegate.server_says_off(servers) if delegate is not None else []

    def server_says_on(self, servers: Sequence[Mapping[str, Any]]) -> str | None:
        delegate = _delegate(self.detected)
        return delegate.server_says_on(servers) if delegate is not None else None


def _delegate(kind: str | None) -> Engine | None:
    """The detected engine, for its parsers (nothing is launched); None while unknown."""
    # Imported here: the registry in specbench.engines imports this module.
    from specbench.engines import engine_for

    return engine_for(kind) if kind in KNOWN_ENGINES else None


# -- imported runs ----------------------------------------------------------------------------
class ImportedEngine(LlamaCppEngine):
    """Per-request results imported from another harness (``specbench import``): nothing is
    launched and no file is read. Arm flags read with llama.cpp's spelling; an arm that speculates
    by declaration or by its draft columns carries the importer's ``--spec-imported`` flag, so every
    check that asks "does this arm speculate?" runs on it."""

    kind = "imported"
    launches = False
    file_flags: ClassVar[frozenset[str]] = frozenset()

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return []

    def version(self) -> dict[str, Any]:
        return {}
