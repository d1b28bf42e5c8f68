"""Inference engines behind one small seam (:class:`specbench.engines.base.Engine`).

Step 5 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report: takes in an arm's flags and hands on a running server (its command line,
environment, readiness, /metrics, logs) and what the engine says about speculation, for the run and
for the analysis. Next, ``client`` streams each request to that server, through ``transport``
(the one HTTP seam, which the engines' own control-plane calls use too).

:data:`ENGINES` is the one registry of engine kinds (a matrix's ``engine`` field, a run's
recorded engine) and :func:`engine_for` the one way to get an engine for reading a run's flags,
server answers and logs. Every other list of engines derives from it (:func:`kinds`: the kinds a
matrix may name, attach mode may detect, ``engine install`` may build, the theory models), from
what each engine class says of itself (engines/origin.py); an engine is one module and one line
here. Launching adds what a registry entry cannot know (the binary to run, an attached URL): the
class's ``for_run``, which :func:`specbench.run.prepare.make_engine` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from specbench.engines.base import Engine
from specbench.engines.generic import GenericEngine
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.openai import AttachedEngine, ImportedEngine
from specbench.engines.sglang import SglangEngine
from specbench.engines.vllm import VllmEngine
from specbench.errors import ConfigError
from specbench.store.record import Record, ServerCounts

if TYPE_CHECKING:
    from specbench.theory.measured.engines import Priors

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Engine",
    "engine_for",
    "kinds",
    "read_record",
    "request_counts",
    "theory_priors",
]

#: Every engine kind, each an Engine class that says the rest of itself (engines/origin.py):
#: launched engines, an attached server whose engine is unknown ("openai"), attach-only engines,
#: and a run imported from another harness. Registry order is the order of every derived list.
ENGINES: dict[str, type[Engine]] = {
    "llamacpp": LlamaCppEngine,
    "vllm": VllmEngine,
    "sglang": SglangEngine,
    "openai": AttachedEngine,
    "generic": GenericEngine,
    "imported": ImportedEngine,
}

#: A matrix's engine when it names none, and a run's recorded before an engine field existed.
DEFAULT_ENGINE = LlamaCppEngine.kind


def kinds(which: Callable[[type[Engine]], bool]) -> tuple[str, ...]:
    """The registry's kinds whose class ``which`` accepts, in registry order."""
    return tuple(kind for kind, cls in ENGINES.items() if which(cls))


def theory_priors() -> Priors:
    """What the theory knows of every engine (:meth:`~specbench.engines.origin.Origin.theory_terms`),
    in registry order: the ``priors=`` of every prediction that names an engine or may not know it."""
    from specbench.theory.measured.engines import Priors  # on use: the theory loads SciPy

    return Priors(tuple(t for cls in ENGINES.values() if (t := cls.theory_terms()) is not None))


def engine_for(kind: str | None) -> Engine:
    """An engine of ``kind`` with its default binary, for what it knows without running one
    (flags, speculation method, server self-description, logs, per-request counts). A run
    recorded before an engine field existed is llama.cpp's."""
    cls = ENGINES.get(kind or DEFAULT_ENGINE)
    if cls is None:
        raise ConfigError(f"engine: unknown engine {kind!r}; known: {', '.join(ENGINES)}")
    return cls()


def request_counts(record: Mapping[str, Any]) -> ServerCounts | None:
    """What the server said of one request, normalised by whichever engine's fields the record
    holds (llama.cpp's ``timings`` first, then vLLM's per-request ``metrics``); None when none of
    them is there."""
    found: ServerCounts | None = None
    for cls, names in _COUNTED:
        if not any(name in record for name in names):
            continue  # not this engine's record: asked of every line of a run, so not called
        counts = cls.request_counts(record)
        if counts is not None:
            found = counts if found is None else found.filled_from(counts)
    return found


#: The engines that send per-request fields of their own, with those fields (``response_fields``).
_COUNTED = tuple((cls, cls.response_fields) for cls in ENGINES.values() if cls.response_fields)


def read_record(line: Mapping[str, Any]) -> Record:
    """A records.jsonl line as a :class:`~specbench.store.record.Record`, with the server's own
    counts normalised at this seam: readers above the engines name no engine's field."""
    return Record.read(line, request_counts(line))
