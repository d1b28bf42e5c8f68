"""Where an engine comes from: the part of the seam that finds, installs or recognises a server.

Each engine class says here, as data or a classmethod with a default, what every other package
used to spell out by the engine's name: how a matrix's ``engine_binary`` becomes a launchable
engine (:meth:`Origin.for_run`), how ``specbench engine install`` makes one (:meth:`Origin.install`),
how attach mode recognises its server (:attr:`Origin.metric_prefix`, :attr:`Origin.model_owner`,
:attr:`Origin.signs`) and asks its version (:meth:`Origin.stated_version`), and what the plan and
the theory may assume of it (:attr:`Origin.model_is_file`, :meth:`Origin.decodes_on_cpu`,
:meth:`Origin.theory_terms`). The registry (:data:`specbench.engines.ENGINES`) derives every list of
engines from these, so adding an engine is one module and one registry line (and, for the theory
to model it, its measured values in engines/measured/, one module named by its kind).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from specbench.engines.http import get_json
from specbench.errors import ConfigError
from specbench.transport import Http

if TYPE_CHECKING:
    from specbench.theory.measured.engines import EngineTerms

Value = int | float | str


@dataclass(frozen=True)
class Sign:
    """Attach mode's evidence for an engine: ``key`` in the JSON object ``path`` answers with.
    ``rank`` orders every engine's signs together, the most specific answer first, so the
    registry's order never decides between two engines."""

    rank: int
    path: str
    key: str


@dataclass(frozen=True)
class InstallOptions:
    """``specbench engine install``'s options; an engine reads those that apply to it."""

    cuda: bool = False
    native: bool = True
    jobs: int | None = None
    binary: str | None = None  # use this one instead of building (--llama-server)


class InstallUi(Protocol):
    """How an install shows its progress (the CLI's console; nothing in tests)."""

    def build(self, name: str, work: Callable[[Callable[[int, int, str], None]], Path]) -> Path:
        """Run ``work`` under a progress bar named ``name``, fed ``(done, total, line)``."""

    def say(self, line: str) -> None:
        """One line of what the installer is doing."""


class Origin:
    """Defaults: an engine nobody installs, that attach mode cannot recognise, launched from
    nothing, decoding wherever its flags say (not known to be this machine's CPU)."""

    kind: ClassVar[str]
    #: How people write the engine's name (reports, the theory's tables).
    display_name: ClassVar[str] = ""
    launches: ClassVar[bool] = True
    #: A matrix may name it (``engine:``); an imported run's engine is recorded, never chosen.
    selectable: ClassVar[bool] = True
    #: Attach mode may record a server as this engine (and hand it this engine's parsers).
    attachable: ClassVar[bool] = True
    #: With ``--attach``, a matrix naming this engine asks which engine answers (True), or
    #: measures whatever answers as this engine (False: an engine with no signature of its own).
    detect_on_attach: ClassVar[bool] = True
    #: /metrics names that start with this mean this engine answers (attach mode's first look).
    metric_prefix: ClassVar[str | None] = None
    #: The ``owned_by`` of this engine's /v1/models cards.
    model_owner: ClassVar[str | None] = None
    #: Keys of other endpoints' answers that name this engine (after /metrics and /v1/models).
    signs: ClassVar[tuple[Sign, ...]] = ()
    #: Where its server states its version (``{"version": ...}``); None: it states none.
    version_path: ClassVar[str | None] = None
    #: ``specbench engine install KIND`` can build or fetch it.
    installable: ClassVar[bool] = False
    #: ``specbench tune`` can spell its candidates (:meth:`tune_args`).
    tunable: ClassVar[bool] = False
    #: Its model is one file whose size is the weight bytes a token reads (GGUF): hashed into the
    #: run's environment, and the basis of size-based time estimates and tune predictions.
    model_is_file: ClassVar[bool] = False
    #: The theory names it (docs/theory.md): :meth:`theory_terms`, ``predict --engine``.
    modelled_by_theory: ClassVar[bool] = False
    #: Fields of a streamed chunk, beyond OpenAI's, that carry this engine's per-request counts
    #: (llama.cpp ``timings``, vLLM ``metrics``); :meth:`Engine.request_counts` reads them.
    response_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def for_run(cls, engine_binary: str | None, given: str | None) -> Self:
        """The engine that launches a matrix's servers: ``engine_binary`` from the matrix,
        ``given`` from the command line (``--llama-server``; an engine without such a flag
        ignores it). An attach-only engine refuses: there is nothing to launch."""
        if not cls.launches:
            raise ConfigError(f"engine: {cls.kind!r} measures an already running server: pass --attach URL")
        raise ConfigError(f"engine: {cls.kind!r} cannot be launched by specbench")

    @classmethod
    def install(cls, options: InstallOptions, ui: InstallUi) -> Path:
        """Find the cached build or make one; its path. Only where :attr:`installable`."""
        raise ConfigError(f"engine install: {cls.kind!r} cannot be installed")

    @classmethod
    async def stated_version(cls, client: Http, base: str) -> dict[str, Any]:
        """The version as a running server states it (attach mode records it in env.json)."""
        if cls.version_path is None:
            return {}
        body = await get_json(client, base + cls.version_path)
        version = body.get("version") if isinstance(body, dict) else None
        return {"version": version} if isinstance(version, str) else {}

    @classmethod
    def decodes_on_cpu(cls, args: Sequence[str]) -> bool:
        """A server given ``args`` generates on this machine's CPU (its speed is then this
        machine's load as well: the plan samples it)."""
        return False

    @classmethod
    def tune_args(cls, candidate: Mapping[str, Value]) -> tuple[str, ...]:
        """Arguments that serve a tune candidate (added to the matrix's common_args); only
        where :attr:`tunable` (:func:`specbench.engines.tuning.candidate_args` asks)."""
        raise ConfigError(f"tune: engine {cls.kind} has no tuning support")

    @classmethod
    def theory_terms(cls) -> EngineTerms | None:
        """What the theory knows of this engine where :attr:`modelled_by_theory` (host costs, verify
        curves, state traffic, catch-up, each with its source): ``terms(kind, display_name)`` of
        its module in engines/measured/, named by its kind. None: nothing, and a prediction knows
        it by its name alone."""
        if not cls.modelled_by_theory:
            return None
        # imported on use, by the one naming rule: those modules load the theory (and SciPy)
        module = importlib.import_module(f"specbench.engines.measured.{cls.kind}")
        terms: EngineTerms = module.terms(cls.kind, cls.display_name)
        return terms
