"""An engine's own argument table, parsed from the text its ``--help`` prints.

Two uses. Before anything launches, a matrix's flags are checked against it: an unknown flag, a
value the engine lists no choice for, or a spelling the engine's parser refuses is a one-line
ConfigError naming the arm (:func:`check_flags`). And arms are compared by what their flags
*mean*, not by how they are spelt (:func:`effective`): aliases folded to one canonical name,
``--flag=value`` split, the last of repeated flags winning (analysis.checks.confounds).

The table is never a hand list: each engine parses its own help text (llama.cpp's
``common_arg::to_string`` layout and Python argparse's, for vLLM and SGLang, both in
:mod:`specbench.engines.helpparse`), the text read once per build
(:mod:`specbench.engines.helptext`). A run stores the table it was checked against in its run
directory (:mod:`specbench.engines.argstore`), so its comparison never depends on the engine
installed where it is read. Where no table could be read, nothing is checked and spellings are
compared as written: an unknown table must never produce an error.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from specbench.errors import ConfigError

#: Effective-configuration values of flags that take none: present, or switched off by a
#: negative spelling (``--no-warmup``).
ON, OFF = "true", "false"


@dataclass(frozen=True)
class ArgSpec:
    """One option as the engine's help lists it."""

    canonical: str  # the name effective configurations use: the first long spelling
    names: tuple[str, ...]  # every spelling that sets it
    negatives: tuple[str, ...] = ()  # spellings that switch it off (llama.cpp --no-X, argparse --no-X)
    #: Values the option always reads: the words of its help hint (llama.cpp prints
    #: ``value_hint`` then ``value_hint_2``, so 0, 1 or 2; ``--control-vector-layer-range START
    #: END`` takes two), the items after it whatever they look like.
    nargs: int = 0
    #: argparse ``nargs="?"``/``"*"`` (``[X]``, ``[X ...]``): then the next item is a value unless
    #: it is a flag.
    optional_value: bool = False
    more_values: bool = False  # argparse ``"+"``/``"*"`` (``X [X ...]``): every non-flag item after it
    choices: tuple[str, ...] = ()  # the values the engine accepts, where its help lists them
    choice_list: bool = False  # the value is a comma-separated list of choices (llama.cpp --spec-type)
    synonyms: Mapping[str, str] = field(default_factory=dict)  # other spellings of a choice
    section: str = ""  # the help section (llama.cpp "speculative params") or argparse group

    @property
    def takes_value(self) -> bool:
        return self.nargs > 0 or self.optional_value or self.more_values


@dataclass(frozen=True)
class ArgTable:
    """Every option of one engine build, with how its parser reads an argv."""

    program: str  # how messages name the engine ("llama-server", "vllm serve")
    specs: tuple[ArgSpec, ...]
    equals: bool  # accepts --flag=value
    underscores: bool  # reads --a_b as --a-b
    dotted: bool = False  # vLLM: --config-flag.key value sets one key of a JSON-valued flag
    abbrev: bool = False  # argparse allow_abbrev: a unique prefix of a long flag is that flag
    positionals: bool = False  # the engine takes non-flag arguments (else a stray value is an error)
    spec_sections: tuple[str, ...] = ()  # sections whose flags configure speculation
    #: Choices compared as written (llama.cpp's ``==``); False where a ``type=`` converter may
    #: fold case before argparse compares (a value right but for case is then never an error).
    exact_case: bool = True
    #: argparse: a one-letter option may carry its value attached (``-O3`` is ``-O 3``).
    attached_short: bool = False
    #: Spellings the engine's parser rewrites before argparse sees them, so its help never prints
    #: them (vLLM: ``-O`` → ``--optimization-level``, vllm/utils/argparse_utils.py).
    rewrites: Mapping[str, str] = field(default_factory=dict)
    _index: dict[str, tuple[ArgSpec, bool]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for spec in self.specs:
            for name in spec.names:
                self._index.setdefault(name, (spec, False))
            for name in spec.negatives:
                self._index.setdefault(name, (spec, True))
        for alias, target in self.rewrites.items():
            if target in self._index:
                self._index.setdefault(alias, self._index[target])

    def __len__(self) -> int:
        return len(self.specs)

    def knows(self, *names: str) -> bool:
        return all(self.lookup(n) is not None for n in names)

    def lookup(self, flag: str) -> tuple[ArgSpec, bool] | None:
        """(the option, whether this spelling negates it) for a flag as written, or None."""
        name = self.fold(flag)
        found = self._index.get(name)
        if found is None and self.abbrev and name.startswith("--"):
            hits = {id(s): (s, neg) for n, (s, neg) in self._index.items() if n.startswith(name)}
            found = next(iter(hits.values())) if len(hits) == 1 else None
        return found

    def fold(self, flag: str) -> str:
        return flag.replace("_", "-") if self.underscores and flag.startswith("--") else flag

    def is_spec(self, spec: ArgSpec) -> bool:
        return spec.section in self.spec_sections


@dataclass(frozen=True)
class Item:
    """One flag of an argv as the engine reads it."""

    written: str  # the flag as written (without an inline value)
    key: str  # the canonical name (the written name where the table does not know it)
    value: str | None  # its values joined by spaces; ON/OFF for a flag that takes none
    spec: ArgSpec | None
    words: tuple[str, ...] = ()  # the argv items read as its values (one for --flag=value)
    inline: bool = False  # written --flag=value
    missing_value: bool = False
    stray: bool = False  # a value with no flag before it that takes one


def _looks_like_flag(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _is_number(text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return not any(c.isalpha() for c in text.lower().replace("e", ""))


def read_args(args: Sequence[str], table: ArgTable | None) -> list[Item]:
    """``args`` as the engine reads them: which item is a flag, which its values. An option reads
    as many items as its help hint names (``spec.nargs``, whatever they look like: llama.cpp's
    ``check_arg`` only counts), then, for argparse's optional and repeated values, the items after
    them that are not flags. Without a table a flag takes the next item unless that is another
    flag (``base.split_flags``' rule)."""
    out: list[Item] = []
    i = 0
    while i < len(args):
        token = args[i]
        if not _looks_like_flag(token):
            out.append(Item(token, "", token, None, words=(token,), stray=True))
            i += 1
            continue
        name, eq, inline = _split(token, table)
        found = _lookup(table, name)
        spec, negative = found if found else (None, False)
        key = _key(table, name, spec)
        if eq:
            out.append(Item(name, key, inline, spec, words=(inline,), inline=True))
            i += 1
            continue
        words = _values(args, i + 1, spec, negative)
        missing = spec is not None and not negative and len(words) < spec.nargs
        if words:
            value: str | None = " ".join(words)
        else:
            value = None if spec is None or missing else (OFF if negative else ON)
        out.append(Item(name, key, value, spec, words=words, missing_value=missing))
        i += 1 + len(words)
    return out


def _values(args: Sequence[str], start: int, spec: ArgSpec | None, negative: bool) -> tuple[str, ...]:
    """The items from ``start`` on that the option ``spec`` reads as its values."""
    if spec is None:
        return _non_flags(args, start, more=False)
    if negative:
        return ()
    fixed = tuple(args[start : start + spec.nargs])
    if len(fixed) < spec.nargs or not (spec.optional_value or spec.more_values):
        return fixed
    return fixed + _non_flags(args, start + spec.nargs, more=spec.more_values)


def _non_flags(args: Sequence[str], start: int, more: bool) -> tuple[str, ...]:
    """The next item if it is not a flag (every such item in a row where ``more``)."""
    out: list[str] = []
    for item in args[start:]:
        if _looks_like_flag(item) or (out and not more):
            break
        out.append(item)
    return tuple(out)


def _split(token: str, table: ArgTable | None) -> tuple[str, str, str]:
    """(flag, "=" or "", inline value): ``--flag=value``, or argparse's ``-Ovalue``."""
    if token.startswith("--"):
        return token.partition("=")
    if table is not None and table.attached_short and len(token) > 2 and table.lookup(token) is None:
        short = table.lookup(token[:2])
        if short is not None and short[0].takes_value:
            return token[:2], "=", token[2:].removeprefix("=")
    return token, "", ""


def _lookup(table: ArgTable | None, name: str) -> tuple[ArgSpec, bool] | None:
    if table is None:
        return None
    found = table.lookup(name)
    if found is None and table.dotted and name.startswith("--") and "." in name:
        base = table.lookup(name.split(".", 1)[0])
        return (base[0], False) if base else None
    return found


def _key(table: ArgTable | None, name: str, spec: ArgSpec | None) -> str:
    if spec is None:
        return table.fold(name) if table else name
    dotted = "." in name and name.startswith("--") and spec.canonical != (table.fold(name) if table else name)
    return f"{spec.canonical}.{name.split('.', 1)[1]}" if dotted else spec.canonical


def normal_value(spec: ArgSpec | None, value: str | None) -> str | None:
    """One spelling per value: a choice's synonym folded (llama.cpp ``-fa 1`` is ``-fa on``), a
    number written one way (``2048.0`` and ``2048`` are the same context size)."""
    if value is None:
        return None
    if spec is not None and value in spec.synonyms:
        return spec.synonyms[value]
    if _is_number(value):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)
    return value


def effective(
    args: Sequence[str], table: ArgTable | None, keep: Callable[[Item], bool] = lambda item: True
) -> dict[str, str | None]:
    """``{canonical flag: value}`` of an argv's items that ``keep`` keeps, the last occurrence
    winning (llama.cpp and argparse alike: llama.cpp warns "only last value will be used"). Stray
    values are left out; the flag check reports them."""
    out: dict[str, str | None] = {}
    for item in read_args(args, table):
        if not item.stray and keep(item):
            out[item.key] = _normal(item)
    return out


def _normal(item: Item) -> str | None:
    """The item's value in one spelling, each of several values on its own (``START END``)."""
    if len(item.words) > 1:
        return " ".join(str(normal_value(item.spec, word)) for word in item.words)
    return normal_value(item.spec, item.value)


# -- the flag check ---------------------------------------------------------------------------
def problems(args: Sequence[str], table: ArgTable) -> list[str]:
    """What the engine would refuse in ``args``, one phrase each naming the flag."""
    out: list[str] = []
    for item in read_args(args, table):
        problem = _problem(item, table)
        if problem:
            out.append(problem)
    return out


def _problem(item: Item, table: ArgTable) -> str | None:
    if item.stray:
        if table.positionals:
            return None
        return (
            f"{item.value!r}: {table.program} expects a flag here, not a value "
            "(the flag before it takes none, or only one)"
        )
    if item.spec is None:
        return _unknown(item.written, table)
    if item.inline and not table.equals:
        return (
            f"{item.written}={item.value}: {table.program} does not read --flag=value; "
            f"write {item.written} {item.value}"
        )
    if item.missing_value:
        count = item.spec.nargs
        needs = "a value" if count == 1 else f"{count} values"
        return f"{item.written}: needs {needs} ({table.program} --help)"
    return _bad_choice(item, table)


def _unknown(flag: str, table: ArgTable) -> str:
    names = [n for s in table.specs for n in (*s.names, *s.negatives)]
    close = difflib.get_close_matches(table.fold(flag), names, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{flag}: not a {table.program} flag ({table.program} --help lists no such flag{hint})"


def _bad_choice(item: Item, table: ArgTable) -> str | None:
    spec = item.spec
    if spec is None or not spec.choices or not item.words or "." in item.written.lstrip("-"):
        return None
    values = [v for w in item.words for v in (w.split(",") if spec.choice_list else [w])]
    allowed = set(spec.choices) | set(spec.synonyms)
    fold: Callable[[str], str] = (lambda v: v) if table.exact_case else str.lower
    bad = [v for v in values if fold(v) not in {fold(a) for a in allowed}]
    if not bad:
        return None
    close = difflib.get_close_matches(bad[0], spec.choices, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return (
        f"{item.written} {bad[0]!r}: not a value {table.program} accepts for it "
        f"({', '.join(spec.choices)}){hint}"
    )


def check_flags(
    table: ArgTable | None, common_args: Sequence[str], arms: Mapping[str, Sequence[str]]
) -> None:
    """ConfigError (exit 2) for the first flag of ``common_args`` or an arm that the engine would
    refuse, naming where it is. Nothing is checked without a table (engine not built yet)."""
    if table is None:
        return
    for where, args in [("common_args", common_args), *((f"arm {a}", v) for a, v in arms.items())]:
        found = problems(args, table)
        if found:
            raise ConfigError(f"{where}: {found[0]}")


#: How an engine reads its help text into a table (None: not this engine's help).
Parser = Callable[[str], ArgTable | None]
