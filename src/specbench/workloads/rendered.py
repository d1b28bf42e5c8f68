"""One request per prompt category as the server renders it with its chat template.

Kept in the cell (``rendered_prompts``) and shown in the report, so a reader sees the prompt the
model actually prefilled: a template that drops the message content, adds a system prompt or
renders tool definitions shows there, not only in a token count (docs/report.md).
"""

from __future__ import annotations

from typing import Any

from specbench.engines.base import Engine
from specbench.matrix.config import RequestSpec
from specbench.transport import Http


def samples(requests: tuple[RequestSpec, ...]) -> list[RequestSpec]:
    """The first request of each (workload, category), in the cell's order."""
    seen: dict[tuple[str | None, str], RequestSpec] = {}
    for req in requests:
        seen.setdefault((req.workload, req.category), req)
    return list(seen.values())


async def render_samples(
    engine: Engine,
    client: Http,
    base_url: str,
    requests: tuple[RequestSpec, ...],
    fitted: dict[str, Any],
) -> list[dict[str, Any]]:
    """Each sample's rendered prompt, asked of ``engine``'s own endpoint, with the messages the run
    sends (fitted ones where a target length was set); a sample the server cannot render is left
    out (nothing to show, no error), and an engine with no way to ask gives an empty list."""
    out = []
    for req in samples(requests):
        messages = fitted[req.prompt_id]["messages"] if req.prompt_id in fitted else list(req.messages)
        rendered = await engine.render_prompt(
            client, base_url, messages, list(req.tools) if req.tools else None
        )
        if rendered is None:  # e.g. tools on a llama-server without --jinja: show the others
            continue
        out.append(
            {"workload": req.workload, "category": req.category, "prompt_id": req.prompt_id, **rendered}
        )
    return out
