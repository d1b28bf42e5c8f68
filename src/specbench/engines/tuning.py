"""How each engine spells a tune candidate (a dict of dimension values) as server arguments.

llama.cpp (``llama-server --help``, https://github.com/ggml-org/llama.cpp/tree/master/tools/server):
``--spec-type``, ``-md``, ``--spec-draft-n-max``/``-n-min``/``-p-min``, and the n-gram sizes of
``ngram-simple`` (``--spec-ngram-simple-size-n``/``-m``) and ``ngram-mod``
(``--spec-ngram-mod-n-match``/``-n-max``). vLLM: one ``--speculative-config`` JSON
(https://docs.vllm.ai/en/latest/features/spec_decode.html).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from specbench.errors import ConfigError

Value = int | float | str

LLAMACPP_METHODS = {
    "draft": "draft-simple",
    "draft-simple": "draft-simple",
    "mtp": "draft-mtp",
    "eagle3": "draft-eagle3",
    "ngram-mod": "ngram-mod",
    "ngram-simple": "ngram-simple",
}
_LLAMACPP_FLAGS = {"draft_n_max": "--spec-draft-n-max", "draft_n_min": "--spec-draft-n-min",
                   "draft_p_min": "--spec-draft-p-min"}  # fmt: skip
_NGRAM_FLAGS = {
    "ngram-simple": {"ngram_n": "--spec-ngram-simple-size-n", "ngram_m": "--spec-ngram-simple-size-m"},
    "ngram-mod": {"ngram_n": "--spec-ngram-mod-n-match", "ngram_m": "--spec-ngram-mod-n-max"},
}
VLLM_METHODS = {"draft": "draft_model", "ngram": "ngram", "mtp": "mtp", "eagle3": "eagle3"}
_VLLM_KEYS = {"draft_n_max": "num_speculative_tokens", "ngram_n": "prompt_lookup_min",
              "ngram_m": "prompt_lookup_max", "draft_model": "model"}  # fmt: skip


def candidate_args(engine: str, candidate: Mapping[str, Value]) -> tuple[str, ...]:
    """Arguments that serve ``candidate`` on ``engine`` (added to the matrix's common_args): the
    engine's own :meth:`~specbench.engines.origin.Origin.tune_args`."""
    from specbench.engines import ENGINES  # the registry imports the engines, which import this

    cls = ENGINES.get(engine)
    if cls is None or not cls.tunable:
        tunable = ", ".join(k for k, c in ENGINES.items() if c.tunable)
        raise ConfigError(f"tune: engine {engine} has no tuning support yet ({tunable})")
    return cls.tune_args(candidate)


def _method(candidate: Mapping[str, Value], methods: Mapping[str, str], engine: str) -> str:
    default = "draft" if "draft_model" in candidate else next(iter(methods))
    name = str(candidate.get("method", default))
    if name not in methods:
        raise ConfigError(f"tune.dimensions.method: {name!r} is not a {engine} method ({', '.join(methods)})")
    return methods[name]


def llamacpp_args(c: Mapping[str, Value]) -> tuple[str, ...]:
    """llama.cpp's flags for one candidate."""
    spec_type = _method(c, LLAMACPP_METHODS, "llamacpp")
    args = ["--spec-type", spec_type]
    if "draft_model" in c:
        args += ["-md", str(c["draft_model"])]
    elif spec_type == "draft-simple":
        raise ConfigError("tune.dimensions: method draft needs a draft_model dimension (one value is fine)")
    ngram = _NGRAM_FLAGS.get(spec_type, {})
    for key, value in c.items():
        flag = _LLAMACPP_FLAGS.get(key) or ngram.get(key)
        if flag:
            args += [flag, _text(value)]
        elif key not in ("method", "draft_model"):
            raise ConfigError(f"tune.dimensions.{key}: llama.cpp {spec_type} has no such setting")
    return tuple(args)


def vllm_args(c: Mapping[str, Value]) -> tuple[str, ...]:
    """vLLM's ``--speculative-config`` for one candidate."""
    config: dict[str, Value] = {"method": _method(c, VLLM_METHODS, "vllm")}
    for key, value in c.items():
        if key in _VLLM_KEYS:
            config[_VLLM_KEYS[key]] = value
        elif key != "method":
            raise ConfigError(f"tune.dimensions.{key}: vLLM has no such setting")
    return ("--speculative-config", json.dumps(config, separators=(",", ":")))


def _text(value: Value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
