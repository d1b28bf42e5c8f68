"""The agent workload: a system prompt, ~8 tools with JSON schemas and a long multi-turn history.

At 43K tokens of agent context prefill was ~80 % of wall clock (docs/mistakes.md, mistake 6), so this
suite measures TTFT and e2e, not only decode rate. History turns are plain user/assistant text
(tool results quoted as text) so any chat template can render them.
"""

from __future__ import annotations

from typing import Any

from specbench.workloads.length import FILL


def _tool(
    name: str, description: str, props: dict[str, dict[str, Any]], required: list[str]
) -> dict[str, Any]:
    schema = {"type": "object", "properties": props, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


_S, _I = {"type": "string"}, {"type": "integer"}
TOOLS: tuple[dict[str, Any], ...] = (
    _tool("get_weather", "Current weather for a city.", {"city": _S, "unit": {"enum": ["c", "f"]}}, ["city"]),
    _tool("search_web", "Search the web.", {"query": _S, "max_results": _I}, ["query"]),
    _tool("read_file", "Read a file from the workspace.", {"path": _S}, ["path"]),
    _tool("write_file", "Write a file in the workspace.", {"path": _S, "content": _S}, ["path", "content"]),
    _tool("run_tests", "Run the project's tests.", {"pattern": _S}, []),
    _tool("create_ticket", "Open an issue.", {"title": _S, "body": _S, "priority": _I}, ["title"]),
    _tool("send_email", "Send an email.", {"to": _S, "subject": _S, "body": _S}, ["to", "subject"]),
    _tool("get_calendar", "Events on a date.", {"date": _S}, ["date"]),
)

SYSTEM = (
    "You are a coding agent working in a repository. Use the tools when an action is needed; "
    "otherwise answer in prose. Be concise."
)

ASKS = (
    ("tool", "Run the tests whose names match 'store' and tell me what failed."),
    ("prose", "Summarise, in one paragraph, what we changed so far and why."),
    ("tool", "Read the file src/specbench/run/runner.py."),
    ("prose", "Explain the trade-off we discussed between n-gram and draft-model speculation."),
    ("tool", "What is the weather in Lisbon, in celsius?"),
    ("prose", "List the open risks in the plan, as bullet points."),
)


def agent_messages(ask: str) -> list[dict[str, Any]]:
    """System prompt, a history turn to be filled to the target length, then the ask."""
    history = "Here is the conversation and tool output so far (earlier turns, tool results quoted):\n" + FILL
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": history},
        {"role": "assistant", "content": "Understood. I have read the history and the tool results."},
        {"role": "user", "content": ask},
    ]
