"""The engine seam: what differs between llama.cpp, vLLM, SGLang and an attached server.

An :class:`Engine` knows how to spell a command line, which flags are speculative, how to
ask a running server what it is, and how to read its speculative counters; where it comes from
(binary, install, attach detection, version endpoint) is :class:`~specbench.engines.origin.Origin`'s
part. Everything else — launching, health, teardown, requests, storage — is shared and lives
elsewhere, in the way every engine is asked through one HTTP seam (:mod:`specbench.transport`).

Only :attr:`Engine.kind` is required: every method has a default that means "this engine says
nothing about it", so an engine overrides what it knows. A launched engine adds :meth:`Engine.command`
and :meth:`~specbench.engines.origin.Origin.for_run`; everything else is for the checks, the
report and the theory to ask when the engine has an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from specbench.engines.argtable import ArgTable
from specbench.engines.flags import METHODS, Speculation, flag_values, int_value, split_flags
from specbench.engines.metrics import MetricSamples, parse_metrics, series, sum_series
from specbench.engines.origin import Origin
from specbench.store.record import ServerCounts
from specbench.transport import Http

# Re-exported: callers read flags and scrapes through the seam's module.
__all__ = [
    "METHODS",
    "Engine",
    "MetricSamples",
    "Speculation",
    "flag_values",
    "int_value",
    "parse_metrics",
    "series",
    "split_flags",
    "sum_series",
]


class Engine(Origin):
    """One inference engine. Subclasses are small; state lives in the runner."""

    #: Flags that configure speculation; any other difference between arms is a confound.
    spec_flags: ClassVar[frozenset[str]] = frozenset()
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = ()
    #: Flags that belong to speculative arms only but do not turn speculation on by themselves
    #: (vLLM's ``--per-request-spec-decode-metrics``): not a confound, not "configured to speculate".
    spec_auxiliary_flags: ClassVar[frozenset[str]] = frozenset()
    health_path: ClassVar[str] = "/health"
    #: Flags whose value is a file (or folder) the engine reads. A matrix's relative values resolve
    #: against the matrix file's folder, and a missing one is an error before anything launches.
    file_flags: ClassVar[frozenset[str]] = frozenset()
    #: Flags whose value is a JSON object with file-valued keys (vLLM's --speculative-config).
    json_file_keys: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: True where a model or file value may instead be a hub id (vLLM, SGLang): only values that
    #: look like paths (or exist beside the matrix) are resolved there.
    hub_ids: ClassVar[bool] = False

    @classmethod
    def resolve_files(cls, flag: str, value: str, resolve: Callable[[str], str]) -> str:
        """``value`` of ``flag`` with each file path in it passed through ``resolve``."""
        if flag in cls.file_flags:
            return resolve(value)
        keys = cls.json_file_keys.get(flag)
        if not keys:
            return value
        try:
            config = json.loads(value)
        except ValueError:
            return value  # not JSON: the engine names the problem, and no path can be found in it
        if not isinstance(config, dict):
            return value
        found = {k: resolve(config[k]) for k in keys if isinstance(config.get(k), str)}
        return json.dumps(config | found) if found else value

    #: What one acceptance log line covers: "request" (one line per finished request, so a cell's
    #: lines cover exactly its requests) or "interval" (a periodic aggregate over a time window that
    #: need not line up with a cell: only ever a partial view, never compared with the others).
    log_acceptance_scope: ClassVar[str] = "request"

    @classmethod
    def is_spec_flag(cls, flag: str) -> bool:
        name = flag.split("=", 1)[0]
        return (
            name in cls.spec_flags
            or name in cls.spec_auxiliary_flags
            or name.startswith(cls.spec_flag_prefixes)
        )

    @classmethod
    def enables_speculation(cls, flag: str) -> bool:
        return cls.is_spec_flag(flag) and flag.split("=", 1)[0] not in cls.spec_auxiliary_flags

    @classmethod
    def speculates(cls, args: Sequence[str]) -> bool:
        """Configured to speculate: a flag that turns speculation on, other than one that names
        no method (llama.cpp ``--spec-type none``). Checks, report and theory all ask this."""
        pairs = [(f, v) for f, v in split_flags(args) if cls.enables_speculation(f)]
        return bool(pairs) and not all(cls.disables(f, v) for f, v in pairs)

    @classmethod
    def disables(cls, flag: str, value: str | None) -> bool:
        """A speculative flag whose value turns speculation off (``--spec-type none``)."""
        return False

    def speculation(self, args: Sequence[str]) -> Speculation | None:
        """The method, K and draft model ``args`` configure; None exactly when :meth:`speculates`
        is False. A value the engine would refuse (K not an integer, JSON that is not an object)
        is a ConfigError naming the flag."""
        if not self.speculates(args):
            return None
        return self._speculation(flag_values(args)) or Speculation(
            "unknown", None, self.draft_model(list(args)), "speculative flags without a method"
        )

    def _speculation(self, flags: Mapping[str, str | None]) -> Speculation | None:
        """The engine's reading of its own speculative flags (called only when it speculates)."""
        return None

    # -- what the server says about itself ---------------------------------------------------
    def server_says_off(self, servers: Sequence[Mapping[str, Any]]) -> list[str]:
        """What an arm's cells' ``describe`` answers say when speculation did not take (empty:
        nothing), each a phrase after "configured to speculate but"."""
        return []

    def server_says_on(self, servers: Sequence[Mapping[str, Any]]) -> str | None:
        """The servers' own statement that speculation is enabled, or None when they make none."""
        return None

    @staticmethod
    def request_counts(record: Mapping[str, Any]) -> ServerCounts | None:
        """What this engine's server said of one request in its own response fields (drafted,
        accepted, prefill and decode times...), in engine-neutral terms; None when this engine's
        fields are absent (another engine's record, or none). :func:`specbench.engines.request_counts`
        asks only the engines whose ``response_fields`` the record holds."""
        return None

    @property
    def kind_name(self) -> str:
        """The engine that answers, as the run records it (an attached server: the detected one)."""
        return self.kind

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        """argv (a list, never a shell string) that serves ``model`` with ``args``; every engine
        that launches gives one (none: nothing is launched)."""
        return []

    def launch_env(self, model: str) -> dict[str, str]:
        """Environment the server needs on top of the caller's (recorded with its command line);
        a variable the user already set wins over these defaults."""
        return {}

    def version(self) -> dict[str, Any]:
        """Version and commit of the engine binary, without a server running."""
        return {}

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        """What a running server says about itself: build, model, speculation state."""
        return {}

    async def render_prompt(
        self,
        client: Http,
        base_url: str,
        messages: list[dict[str, Any]],
        tools: list[Any] | None,
    ) -> dict[str, str] | None:
        """The prompt text the server builds from ``messages`` with its chat template, and the
        endpoint that read it (``{"text", "via"}``); None where the engine offers no way to ask."""
        return None

    async def count_prompt_tokens(
        self, client: Http, base_url: str, messages: list[dict[str, Any]]
    ) -> int | None:
        """Tokens the server will prefill for ``messages``, chat template included, asked of this
        engine's own endpoint; None where the engine offers no way to ask (prompts are then fitted
        to an estimate, :func:`specbench.workloads.length.estimate_tokens`)."""
        return None

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        """Engine-specific fields added to every chat-completions body."""
        return {}

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        """Speculative counters (drafts, draft_tokens, accepted) from one /metrics scrape."""
        return {}

    def draft_model(self, args: list[str]) -> str | None:
        """The separate draft model file an arm's flags name (None: no separate draft model)."""
        return None

    def threads(self, args: Sequence[str]) -> tuple[str, int] | None:
        """The CPU threads ``args`` ask the engine to generate with: (the flag as spelled, the
        count). None: the flags leave it to the engine, or this engine takes no such flag."""
        return None

    def arm_warnings(self, args: list[str]) -> list[str]:
        """Flag combinations this engine accepts but that do not do what they seem to, each a
        phrase after "arm NAME: " (printed in the plan, so a dry run shows them before a launch)."""
        return []

    def expected_log_lines(self, record: dict[str, Any]) -> int:
        """Acceptance log lines the server writes for one finished request (0: none or unknown).
        The runner waits for them before reading a cell's log, so no line is read too early."""
        return 0

    def fallback_patterns(self) -> list[str]:
        """Log substrings that mean speculation failed or silently degraded."""
        return []

    # -- the engine's own argument table and what the server says it runs with --------------
    def arg_table(self) -> ArgTable | None:
        """This build's options, read from its own ``--help`` (cached once per build); None where
        it cannot be read (not built yet, not this engine's help): then nothing is checked."""
        return None

    def settings_log_patterns(self) -> list[str]:
        """Log substrings of startup lines that state a setting (llama.cpp ``n_threads = 1``)."""
        return []

    def reported_settings(self, cell: Mapping[str, Any]) -> dict[str, str]:
        """``{canonical flag: what the server reported about it}`` from one cell of
        ``cells.jsonl`` (its ``server`` self-description and log lines). Two arms whose servers
        report the same for a flag run with the same setting, however their flags spell it."""
        return {}

    def acceptance_log_patterns(self) -> list[str]:
        """Log substrings of lines that report acceptance (kept in cells.jsonl)."""
        return []

    def parse_log_acceptance(self, line: str) -> dict[str, Any] | None:
        """``{"accepted": n, "drafted": m}`` (or engine-specific keys) from one log line."""
        return None

    def forward_probe_request(self, tokens: list[int]) -> tuple[str, dict[str, Any]] | None:
        """(path, JSON body) prefilling exactly ``tokens`` uncached with one output token, for
        :mod:`specbench.run.forwardprobe`; None when the server cannot time its own prefill."""
        return None

    def forward_probe_result(self, response: dict[str, Any]) -> dict[str, Any]:
        """``{"prompt_ms": t, "prompt_n": n}`` from a probe response (server-side prefill time)."""
        return {}
