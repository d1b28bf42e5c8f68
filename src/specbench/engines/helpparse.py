"""Engines' ``--help`` texts read into :class:`~specbench.engines.argtable.ArgTable` s.

Two layouts are read, each as its engine writes it:

- llama.cpp (``common_arg::to_string`` in ``common/arg.cpp``): an option starts at column 0 with
  its spellings joined by ", " (the positive ones first, then the ``--no-`` ones that switch it
  off), then its value hint; the help text starts at column 40, or on the next line when the
  spellings are longer. Sections are ``----- speculative params -----`` and the like. A hint
  ``{a,b}`` or ``[a|b]`` lists the accepted values; a bare ``a,b,c`` (``--spec-type``) lists
  the values of a comma-separated list. The parser accepts ``--a_b`` for ``--a-b`` and never
  ``--flag=value`` (``common_params_parse_ex``).
- Python argparse (vLLM, SGLang): options indented by two spaces, ``-s X, --long X`` with a
  ``{a,b}`` metavar for choices and ``[X]`` for an optional value; ``--x, --no-x`` is a
  ``BooleanOptionalAction``; ``--flag=value`` is accepted.

A text that does not hold the options specbench itself passes is not the engine's help (a
wrapper script, a fake): the caller gets None and checks nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from specbench.engines.argtable import ArgSpec, ArgTable

_HEADER = re.compile(r"^-{3,}\s*(.+?)\s*-{3,}\s*$")
_NAME = re.compile(r"(-{1,2}[A-Za-z0-9][\w.-]*)(,\s*|\s+|$)")
_BRACES = re.compile(r"^\{([^{}]+)\}$")
_BARS = re.compile(r"^\[([a-z0-9-]+(?:\|[a-z0-9-]+)+)\]$")
_COMMA_LIST = re.compile(r"^[a-z0-9-]+(?:,[a-z0-9-]+)+$")
HELP_COLUMN = 40  # common_arg::to_string's n_leading_spaces
#: Fewer options than this is not an engine's full option list (llama-server lists about 250,
#: vLLM about 200, SGLang more): a wrapper's or a fake's own few flags would make every other
#: flag look unknown, so such a text gives no table.
MIN_OPTIONS = 40

#: Other spellings llama.cpp accepts for an ``[on|off|auto]`` value (common/arg.cpp
#: ``is_truthy``, ``is_falsey``, ``is_autoy``): ``-fa 1`` is ``-fa on``, never an error.
_LLAMA_SYNONYMS = {
    "on": ("enabled", "true", "1"),
    "off": ("disabled", "false", "0"),
    "auto": ("-1",),
}


def sane(table: ArgTable | None, own: Sequence[str]) -> bool:
    """The text was the engine's full option list: it knows the flags specbench itself passes
    (``own``) and is not a short list of a few."""
    return table is not None and len(table) >= MIN_OPTIONS and table.knows(*own)


@functools.lru_cache(maxsize=8)
def llama_table(text: str) -> ArgTable:
    """:func:`parse_llama_help`, parsed once per help text: every ``arg_table()`` call (the flag
    check, the plan, a run's stored copy) gets the same table without reading the text again.
    Keyed by the text itself: a rebuilt binary prints another text, hence another table."""
    return parse_llama_help(text)


def argparse_table(
    text: str, program: str, dotted: bool = False, rewrites: Mapping[str, str] | None = None
) -> ArgTable:
    """:func:`parse_argparse_help`, parsed once per help text (as :func:`llama_table`)."""
    return _argparse_table(text, program, dotted, tuple(sorted((rewrites or {}).items())))


@functools.lru_cache(maxsize=8)
def _argparse_table(text: str, program: str, dotted: bool, rewrites: tuple[tuple[str, str], ...]) -> ArgTable:
    return parse_argparse_help(text, program, dotted, dict(rewrites))


def parse_llama_help(text: str, program: str = "llama-server") -> ArgTable:
    """llama.cpp's help text → its table (empty when the text holds no option)."""
    specs: list[ArgSpec] = []
    section = ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            section = header[1]
        elif line.startswith("-"):
            spec = _llama_option(_flag_part(line), section)
            if spec is not None:
                specs.append(spec)
    return ArgTable(
        program, tuple(specs), equals=False, underscores=True, spec_sections=("speculative params",)
    )


def _flag_part(line: str) -> str:
    """The spellings and hint of an option's first line (the help text may follow at column 40)."""
    head = line[:HELP_COLUMN]
    return head.strip() if len(line) > HELP_COLUMN and head.endswith("   ") else line.strip()


def _split_names(part: str) -> tuple[list[str], str]:
    """``-c,    --ctx-size N`` → (["-c", "--ctx-size"], "N")."""
    names: list[str] = []
    rest = part
    while True:
        match = _NAME.match(rest)
        if match is None:
            break
        names.append(match[1])
        rest = rest[match.end() :]
        if not match[2].startswith(","):
            break
    return names, rest.strip()


def _llama_option(part: str, section: str) -> ArgSpec | None:
    names, hint = _split_names(part)
    if not names:
        return None
    cut = _negatives_start(names)
    positive, negatives = names[:cut], tuple(names[cut:])
    choices, choice_list, synonyms = _llama_choices(hint)
    return ArgSpec(
        canonical=_canonical(positive),
        names=tuple(positive),
        negatives=negatives,
        nargs=len(value_words(hint)),
        choices=choices,
        choice_list=choice_list,
        synonyms=synonyms,
        section=section,
    )


def value_words(hint: str) -> list[str]:
    """The words of a value hint, one per value the option reads: ``START END`` is two,
    ``<tensor name pattern>=<buffer type>,...`` and ``[<repo>/]<model>[:quant]`` one each (a space
    inside ``<>``, ``[]``, ``{}`` or ``()`` is part of one value's description)."""
    words: list[str] = []
    depth, word = 0, ""
    for char in hint:
        depth += (char in "<[{(") - (char in ">]})")
        if char.isspace() and depth <= 0:
            if word:
                words.append(word)
            word = ""
        else:
            word += char
    return [*words, word] if word else words


def _negatives_start(names: list[str]) -> int:
    """Where the spellings that switch the option off begin (``len(names)``: none). to_string
    prints ``args`` then ``args_neg``; the negative group holds a ``--no-`` spelling, and may
    begin with a short one that follows a long name (``--repack, -nr, --no-repack``,
    ``-kvo, --kv-offload, -nkvo, --no-kv-offload``). An option spelt only ``--no-x``
    (``--no-host``) is itself positive."""
    first = next((i for i, n in enumerate(names) if i and n.startswith(("--no-", "-no-"))), None)
    if first is None:
        return len(names)
    if first >= 2 and not names[first - 1].startswith("--") and names[first - 2].startswith("--"):
        return first - 1
    return first


def _canonical(names: list[str]) -> str:
    return next((n for n in names if n.startswith("--")), names[0])


def _llama_choices(hint: str) -> tuple[tuple[str, ...], bool, dict[str, str]]:
    braces, bars = _BRACES.match(hint), _BARS.match(hint)
    if braces:
        return tuple(c.strip() for c in braces[1].split(",")), False, {}
    if bars:
        choices = tuple(bars[1].split("|"))
        synonyms = {s: c for c in choices for s in _LLAMA_SYNONYMS.get(c, ())}
        return choices, False, synonyms
    if _COMMA_LIST.match(hint):
        return tuple(hint.split(",")), True, {}
    return (), False, {}


# -- argparse (vLLM, SGLang) ------------------------------------------------------------------
_OPTION_LINE = re.compile(r"^  (-\S.*)$")
_GROUP = re.compile(r"^(\S.*):\s*$")


def parse_argparse_help(
    text: str, program: str, dotted: bool = False, rewrites: Mapping[str, str] | None = None
) -> ArgTable:
    """A Python argparse help text → its table. ``dotted``: vLLM's ``--flag.key value`` form;
    ``rewrites``: spellings the engine's parser turns into listed ones before argparse reads."""
    specs: list[ArgSpec] = []
    group = ""
    for line in text.splitlines():
        heading = _GROUP.match(line)
        if heading:
            group = heading[1]
            continue
        option = _OPTION_LINE.match(line)
        if option:
            spec = _argparse_option(re.split(r"\s{2,}", option[1].strip(), maxsplit=1)[0], group)
            if spec is not None:
                specs.append(spec)
    return ArgTable(
        program,
        tuple(specs),
        equals=True,
        underscores=dotted,  # vLLM's FlexibleArgumentParser reads --a_b as --a-b; plain argparse does not
        dotted=dotted,
        abbrev=True,  # argparse's default: a unique prefix is accepted, so never refused here
        positionals=True,
        exact_case=False,
        attached_short=True,
        rewrites=dict(rewrites or {}),
    )


def _argparse_option(invocation: str, group: str) -> ArgSpec | None:
    names: list[str] = []
    metavars: list[str] = []
    for part in re.split(r",\s+(?=-)", invocation):
        name, _, metavar = part.strip().partition(" ")
        if not name.startswith("-"):
            return None
        names.append(name)
        metavars.append(metavar.strip())
    metavar = next((m for m in metavars if m), "")
    negatives = tuple(n for n in names if n.startswith("--no-") and f"--{n[5:]}" in names)
    positive = [n for n in names if n not in negatives]
    words = value_words(metavar)
    braces = _BRACES.match(words[0]) if words else None
    choices = tuple(c.strip() for c in braces[1].split(",")) if braces else ()
    # argparse's metavar: "X" one value, "X X" two, "[X]" nargs="?", "X [X ...]" nargs="+",
    # "[X ...]" nargs="*" (argparse.HelpFormatter._format_args).
    required = [w for w in words if not w.startswith("[")]
    more = any(w.startswith("[") and "..." in w for w in words)
    return ArgSpec(
        canonical=_canonical(positive),
        names=tuple(positive),
        negatives=negatives,
        nargs=len(required),
        optional_value=bool(words) and not required,
        more_values=more,
        choices=choices,
        section=group,
    )
