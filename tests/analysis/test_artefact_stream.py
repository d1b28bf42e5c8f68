"""ACCEPTANCE_ARTEFACT when every drafting request accepted every drafted token: the client's own
stream can confirm or refute the counters where the server sends a verification step's tokens as
one chunk (vLLM). Frames carry the figures of a real vLLM 0.32 CPU run of examples/vllm-cpu.yaml
(ngram_k3: 12 requests of 128 tokens, 34 chunks each; /metrics 384 drafts, 1152 drafted, 1152
accepted). Regression for the #15 audit: that genuine 100 % (the prompt quotes the answer, the
output equals the baseline's) was a warning telling the reader to distrust it."""

from __future__ import annotations

import pandas as pd

from specbench.analysis.evidence.acceptance import make_source
from specbench.analysis.findings.acceptance import acceptance_artefact


def _frame(tokens_per_chunk: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "arm": "ngram",
            "draft_n": [96.0] * 12,
            "draft_accepted": [96.0] * 12,
            "output_tokens": [128.0] * 12,
            "tokens_per_chunk": [tokens_per_chunk] * 12,
        }
    )


def _sources() -> dict[str, dict[str, object]]:
    metrics = make_source(1152.0, 1152.0, "counter deltas over the measured requests of 3 cell(s)", False)
    metrics["mean_accepted_length"] = 1 + 1152.0 / 384.0  # 4.00 tokens per verification step
    return {"timings": make_source(1152.0, 1152.0, "12 measured requests", False), "metrics": metrics}


def test_a_stream_that_shows_the_counters_steps_makes_the_100_percent_info() -> None:
    (found,) = acceptance_artefact("ngram", _frame(128 / 34), _sources())
    assert (
        found.severity == "info"
        and "the stream confirms it: 3.76 tokens per streamed chunk" in found.evidence
    )
    assert "accepted == drafted on all 12 drafting requests" in found.evidence  # the fact stays


def test_a_stream_with_fewer_tokens_per_chunk_than_the_counters_claim_stays_a_warning() -> None:
    """The published artefact: counters say 100 %, the stream shows ~2 tokens per step."""
    (found,) = acceptance_artefact("ngram", _frame(2.0), _sources())
    assert found.severity == "warning" and "check the drafter's own counters" in found.evidence


def test_one_token_per_chunk_says_nothing_and_stays_a_warning() -> None:
    """llama.cpp streams each token as its own chunk: the stream cannot confirm anything."""
    (found,) = acceptance_artefact("ngram", _frame(1.0), _sources())
    assert found.severity == "warning"
