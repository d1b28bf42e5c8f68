"""llama.cpp's ``llama-server`` (https://github.com/ggml-org/llama.cpp/tree/master/tools/server)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

from specbench.engines.argtable import ArgTable
from specbench.engines.base import (
    Engine,
    MetricSamples,
    Speculation,
    int_value,
    split_flags,
    sum_series,
)
from specbench.engines.helpparse import llama_table, sane
from specbench.engines.helptext import help_text
from specbench.engines.http import apply_template, get_json, template_token_count
from specbench.engines.install import (
    BuildOptions,
    build_info,
    check_executable,
    find_llama_server,
    install_llamacpp,
)
from specbench.engines.origin import InstallOptions, InstallUi, Sign, Value
from specbench.engines.tuning import llamacpp_args
from specbench.errors import EngineStartError, InstallError
from specbench.store.record import ServerCounts, number
from specbench.transport import Http

_LOG_ACCEPT = re.compile(r"draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\)")
_VERSION = re.compile(r"version:\s*(\S+)\s*\(build\s*(\d+),\s*commit\s*(\w+)\)")
_PREFIX = "llamacpp:"
DRAFT_FLAGS = ("-md", "--model-draft", "--spec-draft-model")
#: The generation thread count (common/arg.cpp); -tb (batch, prefill) and -td (draft) aside.
THREAD_FLAGS = ("-t", "--threads")
#: Draft length flags of the model-based methods, newest spelling first, and the default K.
DRAFT_N_FLAGS = ("--spec-draft-n-max", "--draft-max", "--draft-n", "--draft")
DEFAULT_DRAFT_N = 3
#: n-gram methods: the flag that bounds one draft, and its default (common/arg.cpp).
NGRAM_K = {"ngram-mod": ("--spec-ngram-mod-n-max", 64), "ngram-simple": ("--spec-ngram-simple-size-m", 48)}
#: ngram-simple's lookup length when --spec-ngram-simple-size-n is not given (common.h ``size_n``).
NGRAM_SIMPLE_N_DEFAULT = 12
#: Options specbench itself passes (:meth:`LlamaCppEngine.command`): a help text without them is
#: not llama-server's (a wrapper script, a fake), and no table is read from it.
OWN_FLAGS = ("-m", "--host", "--port", "--metrics", "--slots")
DEFAULT_BINARY = Path("llama-server")
#: Startup log lines that state a setting: "llama threadpool init, n_threads = 1"
#: (common/common.cpp) and "initializing, n_slots = 1, n_ctx_slot = 2048" (server-context.cpp;
#: kept for the reader: /props says the same and is what decides).
SETTINGS_LINES = ("llama threadpool init", "initializing, n_slots")
_LOG_SETTING = re.compile(r"\b(n_threads|n_threads_batch)\s*=\s*(\d+)")
#: Which flag each reported quantity settles.
_LOG_FLAGS = {"n_threads": "--threads", "n_threads_batch": "--threads-batch"}
#: Layers offloaded to a GPU: the server no longer decodes on this machine's CPU alone.
GPU_FLAGS = frozenset({"-ngl", "--gpu-layers", "--n-gpu-layers"})


class LlamaCppEngine(Engine):
    kind = "llamacpp"
    display_name = "llama.cpp"
    # Attach mode: metric names start "llamacpp:", /v1/models says owned_by "llamacpp", and /props
    # carries build_info (tools/server/README.md).
    metric_prefix: ClassVar[str | None] = "llamacpp:"
    model_owner: ClassVar[str | None] = "llamacpp"
    signs: ClassVar[tuple[Sign, ...]] = (Sign(50, "/props", "build_info"),)
    installable: ClassVar[bool] = True
    tunable: ClassVar[bool] = True
    model_is_file: ClassVar[bool] = True
    modelled_by_theory: ClassVar[bool] = True
    response_fields: ClassVar[tuple[str, ...]] = ("timings",)
    spec_flags: ClassVar[frozenset[str]] = frozenset(
        {
            "-md",
            "--model-draft",
            "--spec-draft-model",
            "--spec-type",
            "--spec-default",
            "-hfd",
            "-hfrd",
            "--hf-repo-draft",
            "--spec-draft-hf",
            "-ngld",
            "--gpu-layers-draft",
            "--n-gpu-layers-draft",
            "--spec-draft-ngl",
            "-devd",
            "--device-draft",
            "--spec-draft-device",
            "-ctkd",
            "-ctvd",
            "--spec-draft-type-k",
            "--spec-draft-type-v",
            "-td",
            "-tbd",
            "--spec-draft-threads",
            "--spec-draft-threads-batch",
            "--draft-p-min",
            "--draft-p-split",
            "-lcs",
            "-lcd",
            "--lookup-cache-static",
            "--lookup-cache-dynamic",
        }
    )
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = ("--spec-",)
    #: Input files among llama-server's flags (common/arg.cpp: the FNAME arguments); output files
    #: (--slot-save-path, -lcd) may not exist yet and are left alone.
    file_flags: ClassVar[frozenset[str]] = frozenset(
        {
            "-m", "--model", "-md", "--model-draft", "--spec-draft-model",
            "--chat-template-file", "--lora", "--lora-scaled", "--control-vector",
            "--control-vector-scaled", "--grammar-file", "--json-schema-file", "-mm", "--mmproj",
            "-mv", "--model-vocoder", "-lcs", "--lookup-cache-static", "-f", "--file",
            "--ssl-key-file", "--ssl-cert-file", "--api-key-file",
        }
    )  # fmt: skip

    def __init__(self, binary: Path = DEFAULT_BINARY) -> None:
        self.binary = binary

    @classmethod
    def for_run(cls, engine_binary: str | None, given: str | None) -> Self:
        """``--llama-server``, else the matrix's ``engine_binary``, else ``$SPECBENCH_LLAMA_SERVER``,
        else the cached build (``specbench engine install llamacpp``)."""
        if not given and engine_binary:
            check_executable(engine_binary, "engine_binary")  # name the field, not a flag
        binary = find_llama_server(given or engine_binary, BuildOptions())
        if binary is None:
            raise InstallError(
                "llama-server not found: run `specbench engine install llamacpp` or pass --llama-server PATH"
            )
        return cls(binary)

    @classmethod
    def install(cls, options: InstallOptions, ui: InstallUi) -> Path:
        """A user's own build, else the cached one, else a build from the pinned sources."""
        build = BuildOptions(cuda=options.cuda, native=options.native)
        found = find_llama_server(options.binary, build)
        if found is not None:
            return found
        return ui.build("llama-server", lambda report: install_llamacpp(build, options.jobs, report))

    @classmethod
    async def stated_version(cls, client: Http, base: str) -> dict[str, Any]:
        """/props ``build_info`` (``b<N>-<commit>``), split as ``llama-server --version`` gives it."""
        props = await get_json(client, f"{base}/props")
        build = props.get("build_info") if isinstance(props, dict) else None
        if not isinstance(build, str):
            return {}
        number, _, commit = build.partition("-")
        digits = number.removeprefix("b")
        found = {"build_number": int(digits)} if digits.isdigit() else {}
        return {"version": build, "build_info": build, "commit": commit or None, **found}

    @classmethod
    def decodes_on_cpu(cls, args: Sequence[str]) -> bool:
        return not set(args) & GPU_FLAGS

    @classmethod
    def tune_args(cls, candidate: Mapping[str, Value]) -> tuple[str, ...]:
        return llamacpp_args(candidate)

    def arg_table(self) -> ArgTable | None:
        """``llama-server --help`` of this binary (the pinned build when none was named, as for
        reading a finished run), parsed; None when it cannot be read."""
        binary = self._help_binary()
        text = help_text(binary, ["--help"], timeout=30.0) if binary else None
        table = llama_table(text) if text else None
        return table if sane(table, OWN_FLAGS) else None

    def _help_binary(self) -> Path | None:
        if self.binary != DEFAULT_BINARY:
            return self.binary
        try:
            return find_llama_server(None)
        except InstallError:  # $SPECBENCH_LLAMA_SERVER names no program: no table, no error here
            return None

    def settings_log_patterns(self) -> list[str]:
        return list(SETTINGS_LINES)

    def reported_settings(self, cell: Mapping[str, Any]) -> dict[str, str]:
        """/props' per-slot ``n_ctx`` and ``total_slots`` (``describe``), and the startup log's
        ``n_threads``; the context flag is settled only by both (``-np`` divides ``-c``)."""
        server = cell.get("server") or {}
        out: dict[str, str] = {}
        n_ctx, slots = server.get("n_ctx"), server.get("total_slots")
        if isinstance(slots, int):
            out["--parallel"] = f"/props total_slots = {slots}"
            if isinstance(n_ctx, int):
                out["--ctx-size"] = f"/props n_ctx = {n_ctx} per slot, total_slots = {slots}"
        found: dict[str, set[str]] = {}
        for line in cell.get("log_lines") or []:
            for name, value in _LOG_SETTING.findall(str(line)):
                found.setdefault(name, set()).add(value)
        for name, flag in _LOG_FLAGS.items():
            if len(found.get(name, ())) == 1:  # two values in one launch: no single answer
                out[flag] = f"log {name} = {next(iter(found[name]))}"
        return out

    @classmethod
    def disables(cls, flag: str, value: str | None) -> bool:
        name, eq, inline = flag.partition("=")
        return name == "--spec-type" and (inline if eq else value) == "none"

    def _speculation(self, flags: Mapping[str, str | None]) -> Speculation | None:
        """``--spec-type`` names the method (draft-simple/draft, draft-mtp/mtp, *eagle*, *dflash*,
        ngram-mod, ngram-simple/ngram); a draft model given without it reads as a draft method,
        which :meth:`arm_warnings` says llama.cpp will not run."""
        spec_type = (flags.get("--spec-type") or "").strip().lower()
        spec_type = "" if spec_type == "none" else spec_type  # none with a draft: as if not given
        draft = next((flags[f] for f in DRAFT_FLAGS if flags.get(f)), None)
        if spec_type in NGRAM_K or spec_type == "ngram":
            flag, default = NGRAM_K["ngram-mod" if spec_type == "ngram-mod" else "ngram-simple"]
            k = int_value(flags, (flag,))
            return Speculation("ngram", default if k is None else k, None, spec_type, k_default=k is None)
        if not spec_type and draft is None:
            return None
        method = _method(spec_type) if spec_type else "draft"
        k = int_value(flags, DRAFT_N_FLAGS)
        label = spec_type or "-md without --spec-type"
        return Speculation(
            method,
            DEFAULT_DRAFT_N if k is None else k,
            draft if method == "draft" else None,
            label,
            k_default=k is None,
        )

    def server_says_off(self, servers: Sequence[Mapping[str, Any]]) -> list[str]:
        # /slots' per-slot "speculative" is the truth (/props' speculative.types is the default).
        flags = [s for server in servers for s in server.get("slots_speculative", [])]
        return ["/slots reports speculative=false"] if flags and not any(flags) else []

    def server_says_on(self, servers: Sequence[Mapping[str, Any]]) -> str | None:
        flags = [s for server in servers for s in server.get("slots_speculative", [])]
        return "/slots reports speculative=true" if flags and all(flags) else None

    @staticmethod
    def request_counts(record: Mapping[str, Any]) -> ServerCounts | None:
        """``timings`` of a llama.cpp response (tools/server: ``result_timings``): absent draft
        fields mean none drafted; ``prompt_n`` excludes the cached prefix ``cache_n``; the rate is
        (predicted_n − 1) / predicted_ms, first to last token."""
        timings = record.get("timings")
        if not isinstance(timings, Mapping):
            return None
        get = timings.get
        return ServerCounts(
            drafted=number(get("draft_n", 0)),
            accepted=number(get("draft_n_accepted", 0)),
            output_tokens=number(get("predicted_n")),
            prompt_processed=number(get("prompt_n")),
            cached_tokens=number(get("cache_n")),
            prefill_ms=number(get("prompt_ms")),
            decode_ms=number(get("predicted_ms")),
            decode_tok_s=number(get("predicted_per_second")),
        )

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        # --metrics for the spec counters; --slots is on by default but stated for clarity.
        return [
            str(self.binary),
            "-m",
            model,
            *args,
            "--host",
            host,
            "--port",
            str(port),
            "--metrics",
            "--slots",
        ]

    def version(self) -> dict[str, Any]:
        info: dict[str, Any] = {"binary": str(self.binary), "build": build_info(self.binary)}
        try:
            done = subprocess.run(
                [str(self.binary), "--version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:  # missing, not executable, hung
            raise EngineStartError(f"{self.binary} --version: {exc}") from exc
        match = _VERSION.search(done.stderr + done.stdout)
        if match:
            info.update(version=match[1], build_number=int(match[2]), commit=match[3])
        return info

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        props = (await client.get(f"{base_url}/props")).json()
        props = props if isinstance(props, dict) else {}
        slots = (await client.get(f"{base_url}/slots")).json()
        return {
            "build_info": props.get("build_info"),
            "model_path": props.get("model_path"),
            "total_slots": props.get("total_slots"),
            "n_ctx": props.get("default_generation_settings", {}).get("n_ctx"),
            # /props' "speculative.types" is always the default; /slots tells the truth. Without
            # the API key (or with --no-slots) /slots is an error object, not a list: unknown.
            "slots_speculative": (
                [bool(s.get("speculative")) for s in slots if isinstance(s, dict)]
                if isinstance(slots, list)
                else []
            ),
        }

    async def render_prompt(
        self,
        client: Http,
        base_url: str,
        messages: list[dict[str, Any]],
        tools: list[Any] | None,
    ) -> dict[str, str] | None:
        return await apply_template(client, base_url, messages, tools)

    async def count_prompt_tokens(
        self, client: Http, base_url: str, messages: list[dict[str, Any]]
    ) -> int | None:
        return await template_token_count(client, base_url, messages)

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        # timings_per_token: timings (with the running predicted_n) in every streamed chunk, so
        # each chunk's token count is known and ITL is per token, not per chunk.
        extras: dict[str, Any] = {"timings_per_token": True}
        return {**extras, "ignore_eos": True} if ignore_eos else extras

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        names = {
            "drafts": "spec_decode_num_drafts_total",
            "draft_tokens": "spec_decode_num_draft_tokens_total",
            "accepted": "spec_decode_num_accepted_tokens_total",
            "tokens_predicted": "tokens_predicted_total",
        }
        out = {k: sum_series(samples, _PREFIX + v) for k, v in names.items()}
        return {k: v for k, v in out.items() if v is not None}

    def forward_probe_request(self, tokens: list[int]) -> tuple[str, dict[str, Any]] | None:
        # /completion takes token ids as the prompt; cache_prompt false so every token is prefilled.
        body = {"prompt": tokens, "n_predict": 1, "cache_prompt": False, "temperature": 0.0}
        return "/completion", body

    def forward_probe_result(self, response: dict[str, Any]) -> dict[str, Any]:
        timings = response.get("timings") or {}
        return {"prompt_ms": timings.get("prompt_ms"), "prompt_n": timings.get("prompt_n")}

    def acceptance_log_patterns(self) -> list[str]:
        return ["draft acceptance"]

    def parse_log_acceptance(self, line: str) -> dict[str, Any] | None:
        """``print_timing``'s per-request line: accepted / generated draft tokens."""
        match = _LOG_ACCEPT.search(line)
        return {"accepted": int(match[1]), "drafted": int(match[2])} if match else None

    def draft_model(self, args: list[str]) -> str | None:
        names = {"-md", "--model-draft", "--spec-draft-model"}
        found = [args[i + 1] for i, a in enumerate(args[:-1]) if a in names]
        found += [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in names and "=" in a]
        return found[-1] if found else None

    def threads(self, args: Sequence[str]) -> tuple[str, int] | None:
        # The last of -t / --threads wins, as llama.cpp parses them; N <= 0 is llama.cpp's own
        # default (common/arg.cpp), and a value that is no integer fails the launch anyway.
        found: tuple[str, str | None] | None = None
        for flag, value in split_flags(args):
            name, eq, inline = flag.partition("=")
            if name in THREAD_FLAGS:
                found = (name, inline if eq else value)
        if found is None or found[1] is None:
            return None
        try:
            count = int(found[1])
        except ValueError:
            return None
        return (found[0], count) if count > 0 else None

    def arm_warnings(self, args: list[str]) -> list[str]:
        # llama.cpp loads a draft given with -md alone, then frees it: the arm runs as the
        # baseline unless --spec-type names a draft method.
        if self.draft_model(args) is None or any(a.split("=", 1)[0] == "--spec-type" for a in args):
            return []
        return [
            "a draft model but no --spec-type: llama.cpp will not speculate (add --spec-type draft-simple)"
        ]

    def expected_log_lines(self, record: dict[str, Any]) -> int:
        # print_timing writes "draft acceptance" only when the request drafted (n_draft_total > 0).
        counts = self.request_counts(record)
        return 1 if counts is not None and (counts.drafted or 0) > 0 else 0

    def fallback_patterns(self) -> list[str]:
        return [
            "failed to initialize speculative decoding context",
            "the target and draft vocabs are not compatible",
            "draft model vocab type must match target model",
            "speculative decoding not supported by this context",
            "failed to load draft model",
            "failed to create MTP context",
        ]


def _method(spec_type: str) -> str:
    """The method a ``--spec-type`` value names; an unknown one keeps its own name."""
    for word, method in (("mtp", "mtp"), ("eagle", "eagle3"), ("dflash", "dflash")):
        if word in spec_type:
            return method
    return "draft" if spec_type in ("draft", "draft-simple") else spec_type
