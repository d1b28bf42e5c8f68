"""SGLang's server, ``python -m sglang.launch_server`` (https://docs.sglang.ai/advanced_features/speculative_decoding.html).

SGLang exposes **no speculative counters**: ``sglang:spec_accept_length`` and
``sglang:spec_accept_rate`` are gauges set from the last decode-log window (SGLang docs). A before/after
difference of them means nothing, so :meth:`SglangEngine.spec_counters` returns them under
``*_gauge`` keys that the counter-differencing checks ignore. The other acceptance sources are the
``accept len:`` decode log line and ``internal_states[i].avg_spec_accept_length`` in the server
info, which is cumulative since boot (SGLang docs). Every SGLang accept length includes the bonus token.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

from specbench.engines.base import Engine, MetricSamples, Speculation, int_value, series
from specbench.engines.http import get_json, model_cards
from specbench.engines.origin import Sign
from specbench.transport import Http

#: spec_counters key → gauge (SGLang docs; the last two only in some newer versions). Not counters.
GAUGES = {
    "accept_length_gauge": "sglang:spec_accept_length",
    "accept_rate_gauge": "sglang:spec_accept_rate",
    "num_steps_gauge": "sglang:spec_num_steps",
    "num_draft_tokens_gauge": "sglang:spec_num_draft_tokens",
}
# Newer servers serve /server_info and deprecate /get_server_info (SGLang docs): try both, in this order.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")

#: ``--speculative-algorithm`` builtins (server_args.py: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM,
#: DFLASH, DSPARK) → specbench's methods; NEXTN is SGLang's name for MTP, STANDALONE a draft model.
ALGORITHMS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "STANDALONE": "draft",
              "NGRAM": "ngram", "DFLASH": "dflash"}  # fmt: skip
DRAFT_MODEL_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model")

_LOG_MARK = "accept len:"
_LOG_FIELDS = {
    "mean_acceptance_length": re.compile(r"accept len: ([\d.]+)"),
    "rate": re.compile(r"accept rate: ([\d.]+)"),
    "gen_throughput": re.compile(r"gen throughput \(token/s\): ([\d.]+)"),
}
_LOG_RUNNING = re.compile(r"#running-req: (\d+)")
_LOG_CUDA_GRAPH = re.compile(r"cuda graph: (True|False)")


class SglangEngine(Engine):
    """``python -m sglang.launch_server --model-path M --host H --port P --enable-metrics [args]``."""

    kind = "sglang"
    display_name = "SGLang"
    # Attach mode: metric names start "sglang:" (its /v1/models owned_by is not documented); its
    # server info carries internal_states, under either path. /get_server_info states the version.
    metric_prefix: ClassVar[str | None] = "sglang:"
    signs: ClassVar[tuple[Sign, ...]] = (
        Sign(30, "/server_info", "internal_states"),
        Sign(40, "/get_server_info", "internal_states"),
    )
    version_path: ClassVar[str | None] = "/get_server_info"
    modelled_by_theory: ClassVar[bool] = True
    #: Every ``--speculative-*`` flag (sglang:python/sglang/srt/server_args.py@001067f, SGLang docs),
    #: including the ``--speculative-draft-model`` alias; the prefix covers future ones.
    spec_flags: ClassVar[frozenset[str]] = frozenset(
        {
            "--speculative-algorithm",
            "--speculative-draft-model-path",
            "--speculative-draft-model",
            "--speculative-draft-model-revision",
            "--speculative-draft-load-format",
            "--speculative-num-steps",
            "--speculative-eagle-topk",
            "--speculative-num-draft-tokens",
            "--speculative-accept-threshold-single",
            "--speculative-accept-threshold-acc",
            "--speculative-use-rejection-sampling",
            "--speculative-token-map",
            "--speculative-attention-mode",
            "--speculative-draft-attention-backend",
            "--speculative-draft-kv-cache-dtype",
            "--speculative-draft-model-quantization",
            "--speculative-adaptive",
            "--speculative-dflash-block-size",
            "--speculative-dspark-block-size",
        }
    )
    spec_flag_prefixes: ClassVar[tuple[str, ...]] = ("--speculative-",)
    #: 503 while starting, then 200 (SGLang docs).
    health_path: ClassVar[str] = "/health"
    #: File-valued flags of ``sglang.launch_server`` (python/sglang/srt/server_args.py).
    file_flags: ClassVar[frozenset[str]] = frozenset(
        {"--speculative-draft-model-path", "--speculative-draft-model", "--speculative-token-map",
         "--tokenizer-path", "--chat-template", "--ssl-keyfile", "--ssl-certfile"}
    )  # fmt: skip
    hub_ids: ClassVar[bool] = True
    # SGLang logs accept length every few decode steps: an aggregate, not per request.
    log_acceptance_scope: ClassVar[str] = "interval"

    def __init__(self, python: str = "python") -> None:
        self.python = python

    @classmethod
    def for_run(cls, engine_binary: str | None, given: str | None) -> Self:
        """``engine_binary`` is the Python that has sglang installed."""
        return cls(engine_binary or "python")

    def _speculation(self, flags: Mapping[str, str | None]) -> Speculation | None:
        """``--speculative-algorithm`` names the method. K is ``--speculative-num-steps`` (the
        draft depth), else ``--speculative-num-draft-tokens`` less the root token it counts (SGLang
        sets it to num_steps + 1 when topk is 1), else None: SGLang chooses all three itself."""
        algorithm = (flags.get("--speculative-algorithm") or "").strip().upper()
        if not algorithm:
            return None
        method = ALGORITHMS.get(algorithm, algorithm.lower())
        steps = int_value(flags, ("--speculative-num-steps",))
        tokens = int_value(flags, ("--speculative-num-draft-tokens",))
        k = steps if steps is not None else (tokens - 1 if tokens is not None else None)
        draft = next((flags[f] for f in DRAFT_MODEL_FLAGS if flags.get(f)), None)
        return Speculation(method, k, draft if method == "draft" else None, algorithm)

    def server_says_off(self, servers: Sequence[Mapping[str, Any]]) -> list[str]:
        infos = [s["speculative"] for s in servers if isinstance(s.get("speculative"), dict)]
        off = any("speculative_algorithm" in s and s["speculative_algorithm"] is None for s in infos)
        return ["the server info says speculative_algorithm is None"] if off else []

    def server_says_on(self, servers: Sequence[Mapping[str, Any]]) -> str | None:
        algos = [
            s["speculative"].get("speculative_algorithm")
            for s in servers
            if isinstance(s.get("speculative"), dict)
        ]
        return f"the server info says speculative_algorithm is {algos[0]}" if algos and all(algos) else None

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        # --enable-metrics: /metrics (and the spec gauges) exist only with it (SGLang docs).
        return [
            self.python,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--host",
            host,
            "--port",
            str(port),
            "--enable-metrics",
            *args,
        ]

    def version(self) -> dict[str, Any]:
        """The installed sglang distribution's version, read without importing sglang (fast)."""
        code = "import importlib.metadata as m; print(m.version('sglang'))"
        info: dict[str, Any] = {"python": self.python}
        try:
            done = subprocess.run(
                [self.python, "-c", code], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return {**info, "error": f"{type(exc).__name__}: {exc}"}
        if done.returncode != 0:
            return {**info, "error": done.stderr.strip()[-500:]}
        return {**info, "version": done.stdout.strip()}

    async def describe(self, client: Http, base_url: str) -> dict[str, Any]:
        """Server info (/server_info, falling back to /get_server_info) and /v1/models.

        ``speculative_*`` server args say what the server actually runs (None algorithm = no
        speculation). ``avg_spec_accept_length_since_boot`` is cumulative since the server started
        (it includes warm-ups and earlier cells) and appears only once speculation has run (SGLang docs).
        /health is not called: on SGLang it runs a generation (SGLang docs).
        """
        info, path = await _server_info(client, base_url)
        raw = info.get("internal_states")
        states: list[Any] = raw if isinstance(raw, list) else []
        return {
            "engine": "sglang",
            "ready": path is not None,
            "server_info_path": path,
            "version": info.get("version"),
            "speculative": {k: v for k, v in info.items() if k.startswith("speculative_")},
            "avg_spec_accept_length_since_boot": [_state(s, "avg_spec_accept_length") for s in states],
            "last_gen_throughput": [_state(s, "last_gen_throughput") for s in states],
            "models": model_cards(await get_json(client, f"{base_url}/v1/models")),
        }

    async def render_prompt(
        self,
        client: Http,
        base_url: str,
        messages: list[dict[str, Any]],
        tools: list[Any] | None,
    ) -> dict[str, str] | None:
        # SGLang's /tokenize takes prompt text only (no ``messages``), so the chat template cannot be
        # asked for over HTTP: https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/entrypoints/openai/serving_tokenize.py
        return None

    async def count_prompt_tokens(
        self, client: Http, base_url: str, messages: list[dict[str, Any]]
    ) -> int | None:
        # The same /tokenize counts text without the chat template, which would undercount every
        # prompt by the template's tokens; a chat request's usage would count it but leave the
        # fitted prompt in the radix cache. So no count: prompts are fitted to the estimate.
        return None

    def request_extras(self, ignore_eos: bool) -> dict[str, Any]:
        """``ignore_eos`` and neutral ``min_p``/``repetition_penalty`` (SGLang OpenAI protocol
        extras, SGLang docs): servers fill unset sampling fields from the model's preferences."""
        extras: dict[str, Any] = {"min_p": 0.0, "repetition_penalty": 1.0}
        return {**extras, "ignore_eos": True} if ignore_eos else extras

    def spec_counters(self, samples: MetricSamples) -> dict[str, float]:
        """Windowed gauges (mean over label sets), under ``*_gauge`` keys: never difference them.
        SGLang has no drafts/draft_tokens/accepted counters, so those keys are absent."""
        out: dict[str, float] = {}
        for key, name in GAUGES.items():
            values = [v for _, v in series(samples, name)]
            if values:
                out[key] = sum(values) / len(values)
        return out

    def fallback_patterns(self) -> list[str]:
        """No documented SGLang log line announces a speculation failure (SGLang docs); a server
        that ignored the flags shows ``speculative_algorithm: None`` in :meth:`describe`."""
        return []

    def acceptance_log_patterns(self) -> list[str]:
        """The decode log line carries accept len/rate (SGLang docs); informative, not a failure."""
        return [_LOG_MARK]

    def parse_log_acceptance(self, line: str) -> dict[str, Any] | None:
        return parse_log_acceptance(line)


def _state(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else None


async def _server_info(client: Http, base_url: str) -> tuple[dict[str, Any], str | None]:
    """(server info, the path that answered) — newest path first (SGLang docs)."""
    for path in SERVER_INFO_PATHS:
        body = await get_json(client, base_url + path)
        if isinstance(body, dict):
            return body, path
    return {}, None


def parse_log_acceptance(line: str) -> dict[str, Any] | None:
    """One decode log line → its window's accept length and rate.

    ``mean_acceptance_length`` is SGLang's ``accept len`` = (accepted + bs)/forward_ct, which
    **includes the bonus token** (SGLang docs) — comparable with vLLM's 1 + accepted/drafts, not with an
    acceptance rate. ``rate`` is accepted/draft tokens in the window (absent in older versions).
    There are no token counts, so lines can only be averaged, not summed.
    """
    if _LOG_MARK not in line:
        return None
    found = {k: float(m[1]) for k, rx in _LOG_FIELDS.items() if (m := rx.search(line))}
    if "mean_acceptance_length" not in found:
        return None
    out: dict[str, Any] = {"source": "sglang_log", **found}
    if running := _LOG_RUNNING.search(line):
        out["running_req"] = int(running[1])
    if graph := _LOG_CUDA_GRAPH.search(line):
        out["cuda_graph"] = graph[1] == "True"
    return out
