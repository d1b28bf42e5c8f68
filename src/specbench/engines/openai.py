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
from specbench.engines.origin import Sign
from specbench.errors import ClientError
from specbench.transport import Http, open_http

UNKNOWN = "openai"  # the kind of an attached server whose engine could not be told


def _registry() -> dict[str, type[Engine]]:
    # Imported here: the registry in specbench.engines imports this module.
    from specbench.engines import ENGINES

    return ENGINES


# -- detection: from what each engine class says identifies its server (engines/origin.py) ------
def detect_from_metrics(samples: MetricSamples) -> str | None:
    """The engine whose metric prefix appears in a scrape; None when no engine metric is present."""
    prefixes = [(c.metric_prefix, kind) for kind, c in _registry().items() if c.metric_prefix]
    for key in samples:
        for prefix, engine in prefixes:
            if key.startswith(prefix):
                return engine
    return None


def detect_from_models(body: Any) -> str | None:
    """An engine that names itself in /v1/models ``owned_by``."""
    known = {c.model_owner: kind for kind, c in _registry().items() if c.model_owner}
    owners = {card.get("owned_by") for card in model_cards(body)}
    return next((known[o] for o in owners if isinstance(o, str) and o in known), None)


async def detect_from_signs(client: Http, base: str) -> str | None:
    """The first engine sign (most specific first) an endpoint's answer shows; each endpoint is
    asked once, however many engines look at it."""
    signs = sorted(
        ((sign, kind) for kind, c in _registry().items() for sign in c.signs), key=lambda p: p[0].rank
    )
    answers: dict[str, Any] = {}
    for sign, kind in signs:
        if sign.path not in answers:
            answers[sign.path] = await get_json(client, base + sign.path)
        body = answers[sign.path]
        if isinstance(body, dict) and sign.key in body:
            return kind
    return None


async def detect_engine(base_url: str, client: Http | None = None) -> str:
    """Which engine serves ``base_url``: a registry kind, or "openai" (unknown).

    Order: /metrics prefixes, /v1/models ``owned_by``, then the engines' signs by rank (SGLang/vLLM
    server info, llama.cpp /props ``build_info``, and last vLLM /version, because a bare
    ``{"version"}`` is the least specific answer).
    """
    if client is None:
        async with open_http(10.0) as own:
            return await detect_engine(base_url, own)
    base = base_url.rstrip("/")
    samples = await get_metrics(client, base)
    found = detect_from_metrics(samples) if samples else None
    found = found or detect_from_models(await get_json(client, f"{base}/v1/models"))
    found = found or await detect_from_signs(client, base)
    return found or UNKNOWN


# -- attach mode -------------------------------------------------------------------------------
class AttachedEngine(Engine):
    """Measures whatever answers at the URL; speculative counters are feature-detected.

    ``describe`` (the runner calls it once per cell, before any request) detects the engine and
    caches it; ``spec_counters`` re-detects from each scrape's prefixes, so it is right even when
    called without ``describe``.
    """

    kind = "openai"
    display_name = "an OpenAI-compatible server"
    launches = False
    attachable: ClassVar[bool] = False  # the wrapper: it records the engine it found, or "openai"
    # An unknown server is asked where older SGLang servers state a version (as attach mode
    # always did for an engine it could not tell).
    version_path: ClassVar[str | None] = "/get_server_info"
    # A server whose engine could not be told: the flags the user describes it with (--arm-args)
    # are read with llama.cpp's spelling, as imported runs are; a detected engine's run is read
    # by that engine (attach_matrix records it as the run's engine).
    spec_flags: ClassVar[frozenset[str]] = LlamaCppEngine.spec_flags
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = LlamaCppEngine.spec_flag_prefixes

    @classmethod
    def disables(cls, flag: str, value: str | None) -> bool:
        return LlamaCppEngine.disables(flag, value)

    def __init__(
        self, engine: str | None = None, server_version: dict[str, Any] | None = None, redetect: bool = True
    ) -> None:
        self.detected = engine
        self.server_version = server_version or {}
        # False: the matrix named the engine (one with no signature of its own), so a scrape's
        # prefixes do not overrule it.
        self.redetect = redetect

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
        found = detect_from_metrics(samples) if self.redetect else None
        delegate = _delegate(found or self.detected)
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
    cls = _registry().get(kind or UNKNOWN)
    return cls() if cls is not None and cls.attachable else None


# -- imported runs ----------------------------------------------------------------------------
class ImportedEngine(LlamaCppEngine):
    """Per-request results imported from another harness (``specbench import``): nothing is
    launched and no file is read. Arm flags read with llama.cpp's spelling; an arm that speculates
    by declaration or by its draft columns carries the importer's ``--spec-imported`` flag, so every
    check that asks "does this arm speculate?" runs on it."""

    kind = "imported"
    display_name = "imported"
    launches = False
    file_flags: ClassVar[frozenset[str]] = frozenset()
    # Read with llama.cpp's spelling, but none of where llama.cpp comes from: never chosen by a
    # matrix, never recognised at a URL, installed, tuned or modelled.
    selectable: ClassVar[bool] = False
    attachable: ClassVar[bool] = False
    metric_prefix: ClassVar[str | None] = None
    model_owner: ClassVar[str | None] = None
    signs: ClassVar[tuple[Sign, ...]] = ()
    installable: ClassVar[bool] = False
    tunable: ClassVar[bool] = False
    model_is_file: ClassVar[bool] = False
    modelled_by_theory: ClassVar[bool] = False
    response_fields: ClassVar[tuple[str, ...]] = ()

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return []

    def version(self) -> dict[str, Any]:
        return {}
