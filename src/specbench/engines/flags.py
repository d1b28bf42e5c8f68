"""Reading an argv the way the engines' own parsers do: flag/value pairs, the last occurrence
winning, and what an arm's speculative flags configure (:class:`Speculation`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.errors import ConfigError

#: The speculation methods every engine's flags are mapped to (the theory models each of them);
#: an engine method outside this list keeps the engine's own name in :attr:`Speculation.method`.
METHODS = ("draft", "ngram", "eagle", "eagle3", "mtp", "dflash")


@dataclass(frozen=True)
class Speculation:
    """What an arm's flags configure: the method (one of :data:`METHODS`, else the engine's own
    name, or "unknown" when the flags speculate but name no method), the draft length K the flags
    give (None: the engine's default), the separate draft model, and the engine's own spelling.
    ``k_default``: no flag set K, and ``k`` is the default the engine's reading filled in
    (llama.cpp's: common/arg.cpp); a claim about "the draft max you set" is not made on it."""

    method: str
    k: int | None
    draft_model: str | None
    label: str
    k_default: bool = False


def split_flags(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """argv → [(flag, value or None)]: a flag takes the next item unless that is another flag;
    ``--flag=value`` is split at the first ``=``."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        flag = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        takes = nxt is not None and (not nxt.startswith("-") or _is_number(nxt))
        out.append((flag, nxt if takes else None))
        i += 2 if takes else 1
    return out


def flag_values(args: Sequence[str]) -> dict[str, str | None]:
    """``{flag: value}`` of argv, the last occurrence winning (argparse's rule), ``--f=v`` included."""
    out: dict[str, str | None] = {}
    for flag, value in split_flags(args):
        name, eq, inline = flag.partition("=")
        out[name] = inline if eq and flag.startswith("-") else value
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def int_value(flags: Mapping[str, str | None], names: Sequence[str]) -> int | None:
    """The first of ``names`` present in ``flags`` as an int (None: none given); a value that is
    not an integer is a ConfigError naming the flag (the engine would refuse it too)."""
    for name in names:
        value = flags.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise ConfigError(f"{name} {value!r} is not an integer") from None
    return None
