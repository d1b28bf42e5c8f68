"""Any OpenAI-compatible server, measured as one (``engine: generic`` with ``--attach URL``).

Attach mode normally asks which engine answers and reads that engine's counters and fields
(:mod:`specbench.engines.openai`). A matrix that names ``generic`` skips the question: the server
is measured through the OpenAI chat-completions API alone (https://platform.openai.com/docs/api-reference/chat-streaming),
with no engine-specific request field (a strict server refuses unknown ones), no server counters
and no per-request draft counts. Timings come from specbench's own client, as for every engine.
Nothing is launched, so there is no binary, no install and no argument table; the flags an arm
gives (``--arm-args``) are recorded but not read as speculative (their spelling is the server's).
"""

from __future__ import annotations

from typing import Any, ClassVar

from specbench.engines.base import Engine
from specbench.engines.http import get_json, model_cards
from specbench.transport import Http


class GenericEngine(Engine):
    """An OpenAI-compatible server of unknown make: only what the OpenAI API promises."""

    kind = "generic"
    display_name = "an OpenAI-compatible server"
    launches = False
    # The matrix chose it: whatever answers at --attach is measured as this engine, unasked.
    detect_on_attach: ClassVar[bool] = False
    # vLLM and several other OpenAI-compatible servers state {"version": ...} here; one that does
    # not is recorded without a version.
    version_path: ClassVar[str | None] = "/version"

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        """The models the server lists (/v1/models, part of the OpenAI API)."""
        return {"models": model_cards(await get_json(client, f"{base_url.rstrip('/')}/v1/models"))}
