"""FAKE SGLang server (SGLang's docs and server source). Not SGLang.

What it reproduces:
- /server_info, or only the deprecated /get_server_info (``legacy=True``), returning server args
  (``speculative_*``), ``internal_states`` — whose ``avg_spec_accept_length`` appears only once
  speculation has run and is cumulative since boot — and ``version`` (SGLang docs);
- /metrics (only with ``enable_metrics``, SGLang docs) holding the **windowed gauges**
  ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` with labels
  ``model_name, engine_type, tp_rank, pp_rank`` (SGLang docs): each request *sets* them (last window),
  it does not add to them; there are no counters;
- SSE with ``delta.reasoning_content`` (SGLang docs), multi-token chunks, and a usage chunk with
  ``choices: []`` only when ``stream_options.include_usage`` is true (SGLang's default is false);
- decode log lines in the current and older formats (SGLang docs).
"""

from __future__ import annotations

import json
import time
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from tests.fakes.common import Request, Response, not_found, prometheus, sse

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DRAFT = "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"
# Per-request window values the gauges are set to: request i gets ACCEPT_LENGTHS[i % 2].
ACCEPT_LENGTHS = (3.0, 2.0)
NUM_DRAFT_TOKENS = 4
CONTENT = [("Hello", 1), (" world, this", 3), (" is", 2), (" speculative.", 3)]
REASONING = ["Let me", " think."]

LOG_LINES = {
    "new": (
        "[2025-05-14 08:30:00 TP0] Decode batch, #running-req: 1, #token: 512, token usage: 0.01, "
        "accept len: 3.21, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 182.35, "
        "#queue-req: 0, "
    ),
    "old": (
        "[2025-01-02 10:00:00 TP0] Decode batch. #running-req: 2, #token: 900, token usage: 0.02, "
        "accept len: 2.50, gen throughput (token/s): 120.00, #queue-req: 0"
    ),
    "no_graph": (
        "[2025-05-14 08:30:10 TP0] Decode batch, #running-req: 9, #token: 4000, token usage: 0.10, "
        "accept len: 1.80, accept rate: 0.27, cuda graph: False, gen throughput (token/s): 95.10, "
        "#queue-req: 3, "
    ),
    "prefill": "[2025-05-14 08:29:59 TP0] Prefill batch, #new-seq: 1, #new-token: 20, #cached-token: 0",
}


class FakeSglang:
    """In-process FAKE; use :meth:`handler` with tests.fakes.common.mock_client or serve."""

    def __init__(
        self,
        *,
        model: str = MODEL,
        version: str = "0.5.9",
        algorithm: str | None = "EAGLE3",
        legacy: bool = False,
        enable_metrics: bool = True,
        tp_size: int = 2,
    ) -> None:
        self.model, self.version, self.algorithm = model, version, algorithm
        self.legacy, self.enable_metrics, self.tp_size = legacy, enable_metrics, tp_size
        self.requests = 0
        self.window: tuple[float, float] | None = None  # (accept length, accept rate) of the last window
        self.cumulative: list[float] = []
        self.bodies: list[dict[str, Any]] = []

    def handler(self, request: Request) -> Response:
        route = (request.method, request.url.path)
        if route == ("GET", "/health"):
            return Response(200)
        if route == ("GET", "/get_server_info") or (route == ("GET", "/server_info") and not self.legacy):
            return Response(200, json=self.server_info())
        if route == ("GET", "/v1/models"):
            return Response(200, json=self.models())
        if route == ("GET", "/metrics") and self.enable_metrics:
            return prometheus(self.registry())
        if route == ("POST", "/v1/chat/completions"):
            return sse(self.chat(json.loads(request.content)))
        return not_found()

    def server_info(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model_path": self.model,
            "enable_metrics": self.enable_metrics,
            "disable_radix_cache": True,
            "speculative_algorithm": self.algorithm,
            "speculative_draft_model_path": DRAFT if self.algorithm else None,
            "speculative_num_steps": 3 if self.algorithm else None,
            "speculative_eagle_topk": 1 if self.algorithm else None,
            "speculative_num_draft_tokens": NUM_DRAFT_TOKENS if self.algorithm else None,
        }
        state: dict[str, Any] = {"last_gen_throughput": 180.5}
        if self.cumulative:  # present only once speculation has run (SGLang docs)
            state["avg_spec_accept_length"] = sum(self.cumulative) / len(self.cumulative)
        return {**args, "internal_states": [state], "version": self.version}

    def models(self) -> dict[str, Any]:
        # owned_by is not documented for SGLang in engines.md; detection does not rely on it.
        card = {"id": self.model, "object": "model", "created": 1_700_000_000, "owned_by": "sglang"}
        return {"object": "list", "data": [{**card, "root": self.model, "max_model_len": 8192}]}

    def registry(self) -> CollectorRegistry:
        reg = CollectorRegistry()
        labels = ["model_name", "engine_type", "tp_rank", "pp_rank"]
        length = Gauge("sglang:spec_accept_length", "The average acceptance length.", labels, registry=reg)
        rate = Gauge("sglang:spec_accept_rate", "The average acceptance rate.", labels, registry=reg)
        accept_length, accept_rate = self.window or (0.0, 0.0)
        for tp in range(self.tp_size):
            length.labels(self.model, "unified", str(tp), "0").set(accept_length)
            rate.labels(self.model, "unified", str(tp), "0").set(accept_rate)
        return reg

    def metrics_text(self) -> str:
        """What GET /metrics returns now."""
        return generate_latest(self.registry()).decode()

    def chat(self, body: dict[str, Any]) -> list[dict[str, Any] | str]:
        self.bodies.append(body)
        if self.algorithm:
            accept_length = ACCEPT_LENGTHS[self.requests % len(ACCEPT_LENGTHS)]
            # accept len includes the bonus token; rate = accepted / draft tokens (SGLang docs)
            self.window = (accept_length, (accept_length - 1) / (NUM_DRAFT_TOKENS - 1))
            self.cumulative.append(accept_length)
        self.requests += 1
        head: dict[str, Any] = {"id": f"fake{self.requests}", "object": "chat.completion.chunk"}
        head |= {"created": int(time.time()), "model": self.model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"reasoning_content": text}) for text in REASONING]
        events += [chunk({"content": text}) for text, _ in CONTENT]
        events.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            completion = sum(n for _, n in CONTENT)
            usage = {"prompt_tokens": 12, "completion_tokens": completion, "total_tokens": 12 + completion}
            events.append({**head, "choices": [], "usage": usage})
        return [*events, "[DONE]"]
