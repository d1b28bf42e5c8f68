"""FAKE vLLM OpenAI-compatible server (vLLM's docs and server source). Not vLLM.

What it reproduces:
- routes /health, /version ``{"version"}``, /v1/models (``owned_by: "vllm"``), /metrics, and
  streaming /v1/chat/completions;
- Prometheus counters ``vllm:spec_decode_*`` written by prometheus_client (so with ``_total``
  and ``_created`` samples), one series per ``engine`` label (DP mode, vLLM docs), plus the
  per-position counter with its ``position`` label; counters exist only when speculation is on;
- SSE: a role chunk, ``delta.reasoning`` chunks (current vLLM, vLLM serve docs), **multi-token content
  chunks** (several accepted tokens surface as one chunk, vLLM serve docs), a finish chunk, then — with
  ``stream_options.include_usage`` — a final chunk with ``choices: []``, ``usage`` and, when
  per-request metrics are on, ``metrics.speculative_decoding`` (vLLM docs), then ``[DONE]``;
- the ``SpecDecoding metrics:`` log line in both formats (vLLM docs) and a CUDA-graph downgrade warning.

Each request is one deterministic speculative run with ``K = 3``: a first token from prefill and
three verification steps accepting 2, 1 and 2 draft tokens.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from tests.fakes.common import Request, Response, not_found, prometheus, sse

MODEL = "Qwen/Qwen3-8B"
K = 3
STEP_ACCEPTED = (2, 1, 2)  # accepted draft tokens per verification step
REASONING = ["Let me", " think."]
# One chunk per engine step: the prefill token, then accepted+1 tokens per verification step.
CONTENT = [("Hello", 1), (" world, this", 3), (" is", 2), (" speculative.", 3)]

# Per request, derived from STEP_ACCEPTED (so the tests can check the arithmetic):
DRAFTS = len(STEP_ACCEPTED)  # verification steps
DRAFT_TOKENS = K * DRAFTS  # 9
ACCEPTED = sum(STEP_ACCEPTED)  # 5
PER_POS = [sum(1 for a in STEP_ACCEPTED if a > p) for p in range(K)]  # [3, 2, 0]
COMPLETION_TOKENS = sum(n for _, n in CONTENT)  # 9 = 1 + DRAFTS + ACCEPTED

LOG_LINES = {
    "new": (
        "(APIServer pid=1) INFO 05-14 08:30:00 [metrics.py:100] SpecDecoding metrics: Mean acceptance "
        "length: 2.67, Accepted throughput: 12.50 tokens/s, Drafted throughput: 22.50 tokens/s, "
        "Accepted: 125 tokens, Drafted: 225 tokens, Per-position acceptance rate: 0.800, 0.600, 0.267, "
        "Avg Draft acceptance rate: 55.6%"
    ),
    "old": (
        "INFO 04-01 10:00:00 metrics.py:400] SpecDecoding metrics: Draft acceptance rate: 55.6%, "
        "Accepted: 125 tokens, Drafted: 225 tokens"
    ),
    "cuda_graph": (
        "(EngineCore pid=168) WARNING 05-14 08:25:39 [compilation.py:1390] CUDAGraphMode.FULL_AND_PIECEWISE "
        "is not supported with spec-decode for attention backend FlashInferBackend (support: "
        "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=PIECEWISE"
    ),
    "unrelated": "(APIServer pid=1) INFO 05-14 08:30:00 [loggers.py:200] Avg prompt throughput: 0",
}


@dataclass
class EngineCounts:
    """One DP engine's counters (one ``engine`` label set)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=lambda: [0] * K)


class FakeVllm:
    """In-process FAKE; use :meth:`handler` with tests.fakes.common.mock_client or serve."""

    def __init__(
        self,
        *,
        model: str = MODEL,
        version: str = "0.29.0",
        engines: int = 2,
        speculative: bool = True,
        per_request_metrics: bool = True,
    ) -> None:
        self.model, self.version, self.engines = model, version, engines
        self.speculative, self.per_request_metrics = speculative, per_request_metrics
        self.requests = 0
        self.counts = [EngineCounts() for _ in range(engines)]
        self.bodies: list[dict[str, Any]] = []

    # -- routing ----------------------------------------------------------------------------
    def handler(self, request: Request) -> Response:
        route = (request.method, request.url.path)
        if route == ("GET", "/health"):
            return Response(200)
        if route == ("GET", "/version"):
            return Response(200, json={"version": self.version})
        if route == ("GET", "/v1/models"):
            return Response(200, json=self.models())
        if route == ("GET", "/metrics"):
            return prometheus(self.registry())
        if route == ("POST", "/v1/chat/completions"):
            return sse(self.chat(json.loads(request.content)))
        return not_found()

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.model,
            "object": "model",
            "created": 1_700_000_000,
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": 8192,
            "permission": [],
        }
        return {"object": "list", "data": [card]}

    # -- /metrics ---------------------------------------------------------------------------
    def registry(self) -> CollectorRegistry:
        """Fresh registry holding the current counts (prometheus_client adds `_created`)."""
        reg = CollectorRegistry()
        labels = ["model_name", "engine"]
        Gauge("vllm:num_requests_running", "Running requests.", labels, registry=reg).labels(
            self.model, "0"
        ).set(0)
        if not self.speculative:
            return reg
        docs = {
            "drafts": ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
            "draft_tokens": ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
            "accepted": ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."),
        }
        for key, (name, doc) in docs.items():
            counter = Counter(name, doc, labels, registry=reg)
            for engine, counts in enumerate(self.counts):
                counter.labels(self.model, str(engine)).inc(getattr(counts, key))
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*labels, "position"],
            registry=reg,
        )
        for engine, counts in enumerate(self.counts):
            for pos, value in enumerate(counts.per_pos):
                per_pos.labels(self.model, str(engine), str(pos)).inc(value)
        return reg

    def metrics_text(self) -> str:
        """What GET /metrics returns now."""
        return generate_latest(self.registry()).decode()

    # -- chat -------------------------------------------------------------------------------
    def chat(self, body: dict[str, Any]) -> list[dict[str, Any] | str]:
        """The SSE events of one streamed completion; counts it on engine ``requests % engines``."""
        self.bodies.append(body)
        engine = self.counts[self.requests % self.engines]
        self.requests += 1
        if self.speculative:
            engine.drafts += DRAFTS
            engine.draft_tokens += DRAFT_TOKENS
            engine.accepted += ACCEPTED
            engine.per_pos = [a + b for a, b in zip(engine.per_pos, PER_POS, strict=True)]
        head: dict[str, Any] = {"id": f"chatcmpl-fake{self.requests}", "object": "chat.completion.chunk"}
        head |= {"created": int(time.time()), "model": self.model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"reasoning": text}) for text in REASONING]
        events += [chunk({"content": text}) for text, _ in CONTENT]
        events.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(self.usage_chunk(head))
        return [*events, "[DONE]"]

    def usage_chunk(self, head: dict[str, Any]) -> dict[str, Any]:
        usage = {"prompt_tokens": 12, "completion_tokens": COMPLETION_TOKENS}
        usage["total_tokens"] = usage["prompt_tokens"] + COMPLETION_TOKENS
        out: dict[str, Any] = {**head, "choices": [], "usage": usage}
        if self.per_request_metrics and self.speculative:
            histogram = [sum(1 for a in STEP_ACCEPTED if a == n) for n in range(K + 1)]
            out["metrics"] = {
                "speculative_decoding": {
                    "mean_acceptance_length": 1 + ACCEPTED / DRAFTS,
                    "draft_acceptance_rate": ACCEPTED / DRAFT_TOKENS,
                    "acceptance_histogram": histogram,
                    "num_spec_steps": DRAFTS,
                    "num_accepted_draft_tokens": ACCEPTED,
                    "num_draft_tokens": DRAFT_TOKENS,
                    "num_spec_tokens": K,
                }
            }
        return out
