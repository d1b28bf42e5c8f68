"""Arms compared by effective configuration, with the servers' own word deciding.

A ``CONFOUND`` is a claim that two arms ran with different settings, so it compares what the
flags *mean*: ``common_args`` merged with the arm's (``RunData.arm_args``), aliases folded and
``--flag=value`` split through the engine's own argument table (:mod:`specbench.engines.argtable`,
read from its ``--help``), the last of repeated flags winning. The table is the one the run stored
when it was made (``engine_args.json``, :mod:`specbench.engines.argstore`), so a report says the
same on any machine; only a run made before tables were kept is read with the engine installed
where the report is made. Where the server describes itself
(llama.cpp's ``/props`` ``n_ctx`` and ``total_slots``, the startup log's ``n_threads``:
``Engine.reported_settings``), that evidence decides: a difference of spelling or of an explicit
value against the engine's default that every server of both arms reports identically is no
confound. Speculative flags (the engine's rules, or the help's "speculative params" section) are
what an arm may change and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.engines.argstore import ARGS_FILE, StoredArgs
from specbench.engines.argtable import ArgTable, Item, effective, read_args
from specbench.engines.base import Engine

#: The value of a flag an arm does not set (a NUL byte: never a value in an argv).
ABSENT = "\x00absent"


def argument_table(engine: Engine, stored: StoredArgs | None) -> tuple[ArgTable | None, str]:
    """The table a run's flags are read with, and where it came from (for the finding): the one
    the run stored when it was made, so the comparison is the same wherever the report is made;
    only for a run that stored none (made before tables were kept) the engine installed here."""
    if stored is not None:
        if stored.table is None:
            return None, f"none: the engine's help could not be read when the run was made ({ARGS_FILE})"
        return stored.table, f"{stored.table.program} --help, as stored with the run ({ARGS_FILE})"
    table = engine.arg_table()
    if table is None:
        return None, "none: the engine's argument table could not be read"
    return table, f"{table.program} --help of the build installed here (the run stored no {ARGS_FILE})"


def is_speculative(item: Item, engine: Engine, table: ArgTable | None) -> bool:
    """Any spelling of the item's option is speculative by the engine's rules, or its help lists
    it among the speculative options."""
    names = {item.written, item.key.split(".", 1)[0]}
    if item.spec is not None:
        names |= {*item.spec.names, *item.spec.negatives}
        if table is not None and table.is_spec(item.spec):
            return True
    return any(engine.is_spec_flag(n) for n in names)


def effective_settings(args: Sequence[str], engine: Engine, table: ArgTable | None) -> dict[str, str | None]:
    """``{canonical flag: value}`` of the non-speculative flags of ``args`` (flags without a
    value read "true", their ``--no-`` spellings "false")."""
    return effective(args, table, lambda item: not is_speculative(item, engine, table))


def reported(cells: Sequence[Mapping[str, Any]], engine: Engine) -> dict[str, dict[str, set[str]]]:
    """arm → flag → every answer its servers gave about that flag (one per distinct answer)."""
    out: dict[str, dict[str, set[str]]] = {}
    for cell in cells:
        mine = out.setdefault(str(cell.get("arm")), {})
        for flag, said in engine.reported_settings(cell).items():
            mine.setdefault(flag, set()).add(said)
    return out


@dataclass(frozen=True)
class Difference:
    """One setting in which an arm's effective configuration differs from the baseline's."""

    flag: str
    spelt: tuple[str, ...]  # how the two arms wrote it
    mine: str | None
    base: str | None
    reports: tuple[frozenset[str], frozenset[str]]  # (the arm's servers, the baseline's)

    def describe(self) -> str:
        others = [s for s in self.spelt if s != self.flag]
        name = f"{self.flag} (written {', '.join(others)})" if others else self.flag
        said = self.reports
        if said[0] and said[1]:
            evidence = f"the servers report {_one(said[0])} vs {_one(said[1])}"
        else:
            evidence = "no server report of it"
        return f"{name}: {_value(self.mine)} vs {_value(self.base)} ({evidence})"


def _value(value: str | None) -> str:
    if value == ABSENT:
        return "not set (the engine's default)"
    return "set" if value is None else value


def _one(answers: frozenset[str]) -> str:
    return " / ".join(sorted(answers))


def differences(
    mine: Mapping[str, str | None],
    base: Mapping[str, str | None],
    reports: tuple[Mapping[str, set[str]], Mapping[str, set[str]]],
    spelt: Mapping[str, Sequence[str]],
) -> list[Difference]:
    """Settings whose effective values differ and that the servers do not confirm equal (every
    server of both arms reporting one and the same answer for the flag)."""
    out = []
    for flag in sorted(mine.keys() | base.keys()):
        a, b = mine.get(flag, ABSENT), base.get(flag, ABSENT)
        if a == b:
            continue
        said = (frozenset(reports[0].get(flag, ())), frozenset(reports[1].get(flag, ())))
        if said[0] and said[0] == said[1] and len(said[0]) == 1:
            continue  # the servers say they ran alike: a spelling or a default, not a confound
        out.append(Difference(flag, tuple(spelt.get(flag, ())), a, b, said))
    return out


def spellings(args_lists: Sequence[Sequence[str]], table: ArgTable | None) -> dict[str, list[str]]:
    """Canonical flag → every spelling the given argvs used for it (for the message)."""
    out: dict[str, list[str]] = {}
    for args in args_lists:
        for item in read_args(args, table):
            if not item.stray and item.written not in out.setdefault(item.key, []):
                out[item.key].append(item.written)
    return out
