"""Prompts: the bundled set, user JSONL files, and seeded selection across categories.

Speculative decoding speeds up some workloads far more than others (code and repetitive
rewrites accept long drafts, open chat accepts short ones), so every prompt carries a
category and selection spans categories even for a small ``n``.

The bundled file and user files share one JSONL row format, so both go through
:func:`prompt_from_row`. Row-level problems raise :class:`BadRow` (just *what* is wrong);
:func:`gather` adds *where* and turns it into a :class:`ConfigError` or a skip.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from specbench.errors import ConfigError
from specbench.matrix.files import read_regular

CATEGORIES: tuple[str, ...] = (
    "coding",
    "reasoning",
    "chat",
    "summarization",
    "rag",
    "translation",
    "tool-call",
    "json",
    "repetitive",
)
CUSTOM = "custom"
ROLES = frozenset({"system", "user", "assistant", "tool"})
_BUNDLED = "data/prompts.jsonl"

Message = tuple[str, str]


@dataclass(frozen=True)
class Prompt:
    """One benchmark request; messages are ``(role, content)`` pairs so a Prompt is hashable."""

    id: str
    category: str
    messages: tuple[Message, ...]

    def as_messages(self) -> list[dict[str, str]]:
        """The OpenAI chat ``messages`` array for this prompt."""
        return [{"role": role, "content": content} for role, content in self.messages]


class BadRow(ValueError):
    """A row that cannot become a Prompt; the message says what is wrong, not where."""


@dataclass(frozen=True)
class RawRow:
    """One undecoded record of a dataset file and where it came from.

    ``text`` holds a JSONL line, decoded lazily so a broken line is a skippable bad row
    rather than a fatal error; records that arrive already decoded sit in ``value``.
    """

    where: str
    default_id: str
    text: str | None = None
    value: object = None

    def decode(self) -> object:
        if self.text is None:
            return self.value
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as err:
            raise BadRow(f"invalid JSON: {err.msg} (column {err.colno})") from None


Converter = Callable[[object, str], Prompt]


def gather(rows: Iterable[RawRow], convert: Converter, skip_bad: bool) -> tuple[list[Prompt], int]:
    """Convert every row; a bad row raises ``ConfigError("<where>: <what>")`` or is counted."""
    prompts: list[Prompt] = []
    skipped = 0
    for row in rows:
        try:
            prompts.append(convert(row.decode(), row.default_id))
        except BadRow as err:
            if not skip_bad:
                raise ConfigError(f"{row.where}: {err}") from None
            skipped += 1
    return prompts, skipped


def jsonl_rows(text: str, label: str, id_prefix: str) -> Iterator[RawRow]:
    """Non-blank lines of a JSONL text, located as ``label:<line>`` with ids ``<prefix>-<line>``."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield RawRow(where=f"{label}:{lineno}", default_id=f"{id_prefix}-{lineno}", text=line)


MAX_PROMPT_FILE_BYTES = 512 * 1024 * 1024  # well above any prompt set; /dev/zero-like input ends


def read_text(path: Path) -> str:
    """A dataset file's text, with unreadable files reported as a ConfigError naming the path."""
    return read_regular(path, MAX_PROMPT_FILE_BYTES, "prompt file")


def as_object(value: object) -> Mapping[str, object]:
    """The row as a mapping; every format's rows are JSON objects."""
    if not isinstance(value, Mapping):
        raise BadRow(f"expected a JSON object, got {type(value).__name__}")
    return value


def require(row: Mapping[str, object], name: str) -> object:
    """A field that must be present; null counts as missing (Parquet fills absent cells with it)."""
    value = row.get(name)
    if value is None:
        raise BadRow(f"missing field {name!r}")
    return value


def text_field(value: object, name: str) -> str:
    """A non-empty string, the only thing a chat server accepts as content."""
    if not isinstance(value, str) or not value.strip():
        raise BadRow(f"field {name!r} must be a non-empty string")
    return value


def label(row: Mapping[str, object], names: Sequence[str], default: str) -> str:
    """The first present id-like field (string or integer) among ``names``, else ``default``."""
    for name in names:
        value = row.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
            raise BadRow(f"field {name!r} must be a non-empty string or an integer")
        return str(value)
    return default


def parse_messages(value: object, name: str = "messages") -> tuple[Message, ...]:
    """An OpenAI-style messages list, checked so the server never sees a malformed request."""
    if not isinstance(value, list) or not value:
        raise BadRow(f"field {name!r} must be a non-empty list")
    messages = tuple(_message(item, f"{name}[{i}]") for i, item in enumerate(value))
    if not any(role == "user" for role, _ in messages):
        raise BadRow(f"field {name!r} has no 'user' message")
    return messages


def _message(item: object, where: str) -> Message:
    if not isinstance(item, Mapping):
        raise BadRow(f"{where} must be an object with 'role' and 'content'")
    role = item.get("role")
    if role not in ROLES:
        raise BadRow(f"{where}: role must be one of {', '.join(sorted(ROLES))}, got {role!r}")
    return str(role), text_field(item.get("content"), f"{where}.content")


def up_to_first_user(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Messages through the first user turn: later turns answer it, so they are not the prompt."""
    first = next(i for i, (role, _) in enumerate(messages) if role == "user")
    return messages[: first + 1]


def prompt_from_row(value: object, default_id: str) -> Prompt:
    """A JSONL-format row: ``{"prompt": text}`` or ``{"messages": [...]}``; ``id``, ``category`` optional."""
    row = as_object(value)
    has_messages = row.get("messages") is not None
    if (row.get("prompt") is not None) == has_messages:
        raise BadRow("needs exactly one of 'prompt' or 'messages'")
    if has_messages:
        messages = parse_messages(row["messages"])
    else:
        messages = (("user", text_field(row["prompt"], "prompt")),)
    category = label(row, ["category"], CUSTOM)
    return Prompt(id=label(row, ["id"], default_id), category=category, messages=messages)


# --- loading and selection --------------------------------------------------------------


def load_bundled() -> list[Prompt]:
    """The prompts shipped with specbench, read as package data so it works from a wheel."""
    text = resources.files("specbench.workloads").joinpath(_BUNDLED).read_text(encoding="utf-8")
    prompts, _ = gather(jsonl_rows(text, _BUNDLED, "bundled"), prompt_from_row, skip_bad=False)
    return prompts


def load_prompt_file(path: Path | str) -> list[Prompt]:
    """A user JSONL file; ids default to ``<file stem>-<line>`` and categories to ``custom``."""
    path = Path(path)
    rows = jsonl_rows(read_text(path), str(path), path.stem)
    prompts, _ = gather(rows, prompt_from_row, skip_bad=False)
    if not prompts:
        raise ConfigError(f"{path}: no prompts found")
    return prompts


def select(
    prompts: Sequence[Prompt], n: int, seed: int, categories: Sequence[str] | None = None
) -> list[Prompt]:
    """Up to ``n`` prompts, dealt round-robin from seeded-shuffled categories.

    Round-robin means even ``n`` smaller than the number of categories gets ``n`` different
    categories; sorting by id before shuffling makes the result depend only on the set of
    prompts and the seed, not on file order. Never repeats a prompt (repeats would hit the
    server's prefix cache), so it returns fewer than ``n`` when fewer exist.
    """
    if n < 0:
        raise ConfigError(f"number of prompts must be >= 0, got {n}")
    rng = random.Random(seed)
    groups = _shuffled_groups(_by_category(prompts, categories), rng)
    return _deal(groups, n)


def _by_category(prompts: Sequence[Prompt], categories: Sequence[str] | None) -> dict[str, list[Prompt]]:
    groups: dict[str, list[Prompt]] = {}
    for prompt in sorted(prompts, key=lambda p: (p.category, p.id)):
        groups.setdefault(prompt.category, []).append(prompt)
    if categories is None:
        return groups
    missing = sorted(set(categories) - groups.keys())
    if missing:
        raise ConfigError(f"no prompts in categories {missing}; available: {', '.join(sorted(groups))}")
    return {name: groups[name] for name in sorted(set(categories))}


def _shuffled_groups(groups: dict[str, list[Prompt]], rng: random.Random) -> list[list[Prompt]]:
    order = sorted(groups)
    rng.shuffle(order)
    shuffled = []
    for name in order:
        group = list(groups[name])
        rng.shuffle(group)
        shuffled.append(group)
    return shuffled


def _deal(groups: list[list[Prompt]], n: int) -> list[Prompt]:
    """Take one from each group in turn until ``n`` are taken or all groups are empty."""
    chosen: list[Prompt] = []
    depth = 0
    while len(chosen) < n and any(depth < len(group) for group in groups):
        chosen.extend(group[depth] for group in groups if depth < len(group))
        depth += 1
    return chosen[:n]


# --- listing ----------------------------------------------------------------------------


def listing(category: str | None = None, prompt_file: Path | str | None = None) -> dict[str, list[Prompt]]:
    """Category → prompts sorted by id, from the bundled set or ``prompt_file``: what a
    matrix's ``prompts`` / ``categories`` / ``prompt_file`` fields choose from. An unknown
    ``category`` raises ConfigError naming the ones there are."""
    pool = load_bundled() if prompt_file is None else load_prompt_file(prompt_file)
    return _by_category(pool, None if category is None else [category])


def preview(prompt: Prompt, width: int = 72) -> str:
    """The last user message on one line, cut to ``width`` characters."""
    text = next((c for role, c in reversed(prompt.messages) if role == "user"), prompt.messages[-1][1])
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
