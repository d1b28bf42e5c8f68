"""What the theory model needs from a run directory: the models, the device and each arm's method.

Target model, first match wins (``matrix.model`` is the served model path or id)::

    lab truth.json next to it   shapes from truth["target"], weights at truth["target"]["dtype"]
    a .gguf file                its own header (a config.json beside it may describe another file)
    config.json next to it      (or inside it, for a model directory) Hugging Face architecture
    a preset name               the model string (``Qwen/Qwen3.6-27B``) or the longest preset name
                                contained in its file name (``Qwen3.6-27B-UD-Q4_K_XL.gguf``)

Bytes per weight: the lab dtype; else a quant preset named in the file name (longest match);
else file bytes / total parameters; else the config's ``torch_dtype`` (unquantised checkpoints).

Device: ``env.json`` ``gpus[0].name`` matched to a GPU preset (vendor words ignored, longest
preset name contained in it); the ``cpu`` probe the runner stored in ``machine_probe.json`` when
the run had no GPU or the engine was built without CUDA (never a probe at render time).

Arm method (llama.cpp argv)::

    --spec-type draft-simple|draft   draft   K = --spec-draft-n-max (3)   draft model: -md PATH
    --spec-type draft-mtp|mtp        mtp     K = --spec-draft-n-max (3)
    --spec-type *eagle*              eagle3  K = --spec-draft-n-max (3)
    --spec-type *dflash*             dflash  K = --spec-draft-n-max (3)
    --spec-type ngram-mod            ngram   K = --spec-ngram-mod-n-max (64)
    --spec-type ngram-simple|ngram   ngram   K = --spec-ngram-simple-size-m (48)

vLLM's ``--speculative-config JSON`` maps ``method`` the same way with K = num_speculative_tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.checks import split_flags
from specbench.errors import ConfigError
from specbench.store import RunStore
from specbench.theory.arch import Architecture, architecture_from_mapping, total_params
from specbench.theory.gguf_header import architecture_from_gguf
from specbench.theory.hardware import Gpu
from specbench.theory.hf_config import load_hf_config
from specbench.theory.machine import stored_cpu
from specbench.theory.methods import Method
from specbench.theory.predict import Weights
from specbench.theory.presets import Catalog, gpus, key, models, quants

LAB_BYTES = {"f16": 2.0, "f32": 4.0, "q8_0": 34 / 32}  # Q8_0: 32 int8 + one f16 scale per block
HF_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
VENDOR_WORDS = ("nvidia", "geforce", "tesla")
DRAFT_FLAGS = ("-md", "--model-draft", "--spec-draft-model")
DRAFT_N_FLAGS = ("--spec-draft-n-max", "--draft-max", "--draft-n", "--draft")
DEFAULT_DRAFT_N = 3
NGRAM_DEFAULTS = {
    "ngram-mod": ("--spec-ngram-mod-n-max", 64),
    "ngram-simple": ("--spec-ngram-simple-size-m", 48),
}
VLLM_METHODS: dict[str, Method] = {
    "draft_model": "draft",
    "ngram": "ngram",
    "eagle": "eagle3",
    "eagle3": "eagle3",
    "mtp": "mtp",
    "deepseek_mtp": "mtp",
    "qwen3_next_mtp": "mtp",
}


@dataclass(frozen=True)
class ArmMethod:
    """One arm's speculation: the theory method, draft length K, draft model path, engine's name."""

    method: Method
    draft_max: int
    draft_path: str | None
    label: str


@dataclass(frozen=True)
class RunModels:
    """The run's target (and the lab draft, when the run used a lab pair) and where they came from."""

    target: Weights
    draft: Weights | None
    source: str


# -- arms ---------------------------------------------------------------------------------------
def arm_method(argv: Sequence[str]) -> ArmMethod | None:
    """The speculation ``argv`` configures (see the module docstring); None when it does not speculate.

    An engine method the theory has no model for is a ConfigError naming it.
    """
    flags = dict(split_flags(argv))
    if "--speculative-config" in flags:
        return _vllm_method(flags["--speculative-config"])
    spec_type = (flags.get("--spec-type") or "").strip().lower()
    if not spec_type or spec_type == "none":
        return None
    draft_path = next((flags[f] for f in DRAFT_FLAGS if flags.get(f)), None)
    if spec_type in NGRAM_DEFAULTS or spec_type == "ngram":
        flag, default = NGRAM_DEFAULTS["ngram-mod" if spec_type == "ngram-mod" else "ngram-simple"]
        return ArmMethod("ngram", _int_flag(flags, (flag,), default), None, spec_type)
    method = _llamacpp_method(spec_type)
    if method == "draft" and draft_path is None:
        raise ConfigError(f"--spec-type {spec_type} without a draft model (-md PATH)")
    k = _int_flag(flags, DRAFT_N_FLAGS, DEFAULT_DRAFT_N)
    return ArmMethod(method, k, draft_path if method == "draft" else None, spec_type)


def _llamacpp_method(spec_type: str) -> Method:
    if "mtp" in spec_type:
        return "mtp"
    if "eagle" in spec_type:
        return "eagle3"
    if "dflash" in spec_type:
        return "dflash"
    if spec_type in ("draft", "draft-simple"):
        return "draft"
    raise ConfigError(f"--spec-type {spec_type}: the theory has no model for this method")


def _int_flag(flags: Mapping[str, str | None], names: Sequence[str], default: int) -> int:
    for name in names:
        value = flags.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise ConfigError(f"{name} {value!r} is not an integer") from None
    return default


def _vllm_method(raw: str | None) -> ArmMethod:
    try:
        cfg = json.loads(raw or "")
    except json.JSONDecodeError:
        raise ConfigError("--speculative-config is not JSON") from None
    if not isinstance(cfg, dict):
        raise ConfigError("--speculative-config must be a JSON object")
    name = str(cfg.get("method") or ("draft_model" if cfg.get("model") else "")).lower()
    if name not in VLLM_METHODS:
        raise ConfigError(f"speculative method {name!r}: the theory has no model for it")
    method = VLLM_METHODS[name]
    k = int(cfg.get("num_speculative_tokens") or DEFAULT_DRAFT_N)
    return ArmMethod(method, k, str(cfg["model"]) if method == "draft" else None, name)


# -- models -------------------------------------------------------------------------------------
def lab_architecture(name: str, shape: Mapping[str, Any], vocab: int) -> Architecture:
    """A lab model (llama dense, qwen3moe or qwen35 hybrid, untied LM head) from its truth.json shape.

    dense: ``ffn = n_ff``; moe: every layer routes ``n_expert_used`` of ``n_expert`` experts of
    width ``n_ff_exp``, no shared expert; hybrid: a dense FFN and ``recurrent_layers`` Gated
    DeltaNet layers (``ssm_n_group`` key heads, ``ssm_n_v_head`` value heads, both of dimension
    ``ssm_d_state``, a ``ssm_d_conv``-wide convolution), the rest gated full attention;
    ``head_dim = n_embd / n_head``.
    """
    moe = shape.get("arch") == "moe"
    fields: dict[str, Any] = {
        "layers": shape["n_layer"],
        "hidden": shape["n_embd"],
        "heads": shape["n_head"],
        "kv_heads": shape["n_head_kv"],
        "head_dim": int(shape["n_embd"]) // int(shape["n_head"]),
        "vocab": vocab,
        "source": "lab truth.json",
    }
    if moe:
        fields |= {
            "experts": shape["n_expert"],
            "top_k": shape["n_expert_used"],
            "expert_ffn": shape["n_ff_exp"],
        }
    else:
        fields["ffn"] = shape["n_ff"]
    if shape.get("arch") == "hybrid":
        fields |= {
            "linear_layers": shape["recurrent_layers"],
            "linear_key_heads": shape["ssm_n_group"],
            "linear_value_heads": shape["ssm_n_v_head"],
            "linear_key_dim": shape["ssm_d_state"],
            "linear_value_dim": shape["ssm_d_state"],
            "conv_kernel": shape["ssm_d_conv"],
            "attn_output_gate": True,
        }
    return architecture_from_mapping(name, fields)


def lab_name(role: str, shape: Mapping[str, Any]) -> str:
    """``lab target dense 1024x16`` (hidden x layers), with ``E/k experts`` for an MoE."""
    moe = f", {shape['n_expert_used']}/{shape['n_expert']} experts" if shape.get("arch") == "moe" else ""
    return f"lab {role} {shape.get('arch', '?')} {shape['n_embd']}x{shape['n_layer']}{moe}"


def lab_weights(truth: Mapping[str, Any], role: str) -> Weights:
    """``truth[role]`` ("target" or "draft") as Weights at its dtype's bytes per weight."""
    try:
        shape = truth[role]
        dtype = str(shape.get("dtype", "f16"))
        arch = lab_architecture(lab_name(role, shape), shape, int(truth["vocab_size"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"truth.json: bad or missing {role} shape ({err})") from None
    if dtype not in LAB_BYTES:
        raise ConfigError(f"truth.json: unknown dtype {dtype!r}")
    return Weights(arch, LAB_BYTES[dtype], dtype)


def _read_truth(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _truth_next_to(model: str) -> dict[str, Any] | None:
    p = Path(model)
    return _read_truth((p if p.is_dir() else p.parent) / "truth.json")


def _config_next_to(model: str) -> Path | None:
    p = Path(model)
    config = p / "config.json" if p.is_dir() else p.parent / "config.json"
    return config if model and config.is_file() else None


def longest_contained(catalog: Catalog[Any], text: str) -> str | None:
    """The display name whose normalised name or alias is the longest substring of ``key(text)``."""
    wanted = key(text)
    spellings = {key(n): n for n in catalog.names()} | dict(catalog.aliases)
    hits = [k for k in spellings if k and k in wanted]
    return spellings[max(hits, key=len)] if hits else None


def _preset_model(model: str) -> Architecture | None:
    """The preset named by a model id (``Qwen/Qwen3.6-27B``) or contained in its file name."""
    name = longest_contained(models(), model.rsplit("/", 1)[-1])
    return models().get(name) if name else None


def _architecture(model: str) -> tuple[Architecture, str] | None:
    if model.endswith(".gguf") and Path(model).is_file():
        return architecture_from_gguf(model), f"GGUF header ({model})"
    config = _config_next_to(model)
    if config is not None:
        return load_hf_config(config), f"config.json ({config})"
    arch = _preset_model(model)
    return (arch, f"preset {arch.name}") if arch else None


def _hf_dtype(model: str) -> str | None:
    config = _config_next_to(model)
    if config is None or model.endswith(".gguf"):
        return None
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    cfg = raw.get("text_config") or raw
    if raw.get("quantization_config") or cfg.get("quantization_config"):
        return None
    return HF_DTYPES.get(str(raw.get("torch_dtype") or raw.get("dtype") or cfg.get("torch_dtype")))


def model_weights(arch: Architecture, model: str, file_bytes: int | None = None) -> Weights:
    """``arch`` at the bytes per weight of ``model`` (see the module docstring for the order)."""
    quant = longest_contained(quants(), Path(model).name)
    if quant:
        q = quants().get(quant)
        return Weights(arch, q.bytes_per_weight, q.name)
    p = Path(model)
    size = p.stat().st_size if p.is_file() else file_bytes
    if size:
        bpw = size / total_params(arch)
        return Weights(arch, bpw, f"{bpw * 8:.2f} bits/weight (file size)")
    dtype = _hf_dtype(model)
    if dtype:
        q = quants().get(dtype)
        return Weights(arch, q.bytes_per_weight, q.name)
    raise ConfigError(f"cannot tell the weight format of {model!r} (no quant in its name, no file)")


def weights_for(model: str, file_bytes: int | None = None) -> tuple[Weights, str] | None:
    """A non-lab model path or id as Weights, or None when no config.json or preset describes it."""
    found = _architecture(model)
    if found is None:
        return None
    arch, source = found
    return model_weights(arch, model, file_bytes), source


def _matrix_model(run_dir: Path) -> tuple[str, int | None]:
    store = RunStore(run_dir)
    model = str((store.manifest().get("matrix") or {}).get("model") or "")
    if not model:
        raise ConfigError("the run's matrix names no model")
    size = (store.env().get("model") or {}).get("bytes")
    return model, int(size) if isinstance(size, int | float) and size > 0 else None


def model_from_run(run_dir: Path) -> RunModels | None:
    """The run's target (and lab draft) for the theory, or None when nothing describes the model."""
    model, size = _matrix_model(run_dir)
    truth = _truth_next_to(model)
    if truth is not None and "target" in truth:
        draft = lab_weights(truth, "draft") if "draft" in truth else None
        return RunModels(lab_weights(truth, "target"), draft, f"lab truth.json next to {model}")
    found = weights_for(model, size)
    return RunModels(found[0], None, found[1]) if found else None


def draft_weights(path: str) -> Weights:
    """The draft model of an arm (``-md PATH``): a lab draft, a config.json or a preset."""
    truth = _truth_next_to(path)
    if truth is not None and "draft" in truth:
        return lab_weights(truth, "draft")
    found = weights_for(path)
    if found is None:
        raise ConfigError(f"draft model {path!r}: no truth.json, config.json or preset describes it")
    return found[0]


# -- device -------------------------------------------------------------------------------------
def gpu_preset(name: str) -> Gpu:
    """A GPU preset for an nvidia-smi name such as ``NVIDIA GeForce RTX 3090``."""
    text = key(name)
    for word in VENDOR_WORDS:
        text = text.replace(word, "")
    found = longest_contained(gpus(), text)
    if found is None:
        raise ConfigError(f"GPU {name!r} has no preset; known: {', '.join(gpus().names())}")
    return gpus().get(found)


def device_from_run(run_dir: Path) -> Gpu:
    """The run's GPU preset, or for CPU runs the ``cpu`` probe stored while the run ran (machine.py)."""
    env = RunStore(run_dir).env()
    devices = env.get("gpus") or []
    build = (env.get("engine") or {}).get("build") or {}
    if not devices or build.get("cuda") is False:
        return stored_cpu(run_dir)
    return gpu_preset(str(devices[0].get("name", "")))
