"""FAKE llama-server, only the routes attach-mode detection reads (llama.cpp server docs). Not
llama.cpp: the real server is tested against the real binary elsewhere.

- /metrics: ``llamacpp:``-prefixed counters in llama-server's own text format (no ``_created``),
  or HTTP 501 without ``--metrics``;
- /props with ``build_info``, /slots with ``speculative``, /v1/models with ``owned_by: "llamacpp"``.
"""

from __future__ import annotations

from tests.fakes.common import Request, Response, not_found

DRAFTS, DRAFT_TOKENS, ACCEPTED = 10, 40, 25

METRICS = f"""# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 120
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 80
# HELP llamacpp:spec_decode_num_drafts_total Number of speculative decoding drafts.
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total {DRAFTS}
# HELP llamacpp:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total {DRAFT_TOKENS}
# HELP llamacpp:spec_decode_num_accepted_tokens_total Number of accepted draft tokens.
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total {ACCEPTED}
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""


class FakeLlamaCpp:
    def __init__(self, *, metrics: bool = True) -> None:
        self.metrics = metrics

    def handler(self, request: Request) -> Response:
        path = request.url.path
        if path == "/metrics":
            if not self.metrics:
                message = "This server does not support metrics endpoint. Start it with `--metrics`"
                return Response(501, json={"error": {"code": 501, "message": message}})
            return Response(200, headers={"content-type": "text/plain; version=0.0.4"}, text=METRICS)
        if path == "/props":
            return Response(
                200,
                json={
                    "build_info": "b1-0c1e570",
                    "model_path": "/models/target.gguf",
                    "total_slots": 1,
                    "default_generation_settings": {"n_ctx": 4096, "params": {}},
                },
            )
        if path == "/slots":
            return Response(200, json=[{"id": 0, "n_ctx": 4096, "speculative": True}])
        if path == "/v1/models":
            card = {"id": "target.gguf", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx": 4096}}
            return Response(200, json={"object": "list", "data": [card]})
        return not_found()
