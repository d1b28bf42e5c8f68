"""What the theory model needs from a run directory: the models, the device and each arm's method.

Target model, first match wins (``matrix.model`` is the served model path or id)::

    lab truth.json next to it   shapes from truth["target"], weights at truth["target"]["dtype"]
    architectures.json entry    the header/config.json shape stored when the run was made (stored.py)
    a .gguf file                its own header (a config.json beside it may describe another file)
    config.json next to it      (or inside it, for a model directory) Hugging Face architecture
    a preset name               the model string (``Qwen/Qwen3.6-27B``) or the longest preset name
                                contained in its file name (``Qwen3.6-27B-UD-Q4_K_XL.gguf``)

Bytes per weight: the lab dtype; else a quant preset named in the file name (longest match);
else file bytes / total parameters; else the config's ``torch_dtype`` (unquantised checkpoints).

Device: ``env.json`` ``gpus[0].name`` matched to a GPU preset (vendor words ignored, longest
preset name contained in it); the ``cpu`` probe the runner stored in ``machine_probe.json`` when
the run had no GPU or the engine was built without CUDA (never a probe at render time).

Arm method: the run's engine reads its own flags (``Engine.speculation``: llama.cpp ``--spec-type``,
vLLM ``--speculative-config``/``-sc`` JSON, SGLang ``--speculative-algorithm``) into a method, K
and draft model; the theory maps EAGLE to its EAGLE-3 model and refuses methods it has no model for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.predicted.stored import StoredModel, read_stored
from specbench.engines.base import Engine
from specbench.errors import ConfigError
from specbench.matrix.files import matrix_path
from specbench.store.machineprobe import stored_cpu
from specbench.store.rundir import RunStore
from specbench.theory.arch import Architecture, architecture_from_mapping, total_params
from specbench.theory.gguf_header import architecture_from_gguf
from specbench.theory.hardware import Gpu
from specbench.theory.hf_config import load_hf_config
from specbench.theory.inputs import Weights
from specbench.theory.methods import Method
from specbench.theory.presets import Catalog, gpus, models, preset_key, quants

LAB_BYTES = {"f16": 2.0, "f32": 4.0, "q8_0": 34 / 32}  # Q8_0: 32 int8 + one f16 scale per block
HF_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
VENDOR_WORDS = ("nvidia", "geforce", "tesla")
DEFAULT_DRAFT_N = 3  # K when the engine chooses it itself (vLLM without num_speculative_tokens, SGLang auto)
#: Engine methods (engines.base.METHODS) → the theory's; EAGLE(-2) runs on the EAGLE-3 head model.
THEORY_METHODS: dict[str, Method] = {"draft": "draft", "ngram": "ngram", "eagle": "eagle3",
                                     "eagle3": "eagle3", "mtp": "mtp", "dflash": "dflash"}  # fmt: skip


@dataclass(frozen=True)
class ArmMethod:
    """One arm's speculation: the theory method, draft length K, draft model path, engine's name."""

    method: Method
    draft_max: int
    draft_path: str | None
    label: str
    k_default: bool = False  # no flag set K: draft_max is the engine's default (Speculation.k_default)


@dataclass(frozen=True)
class RunModels:
    """The run's target (and the lab draft, when the run used a lab pair) and where they came from."""

    target: Weights
    draft: Weights | None
    source: str


# -- arms ---------------------------------------------------------------------------------------
def arm_method(argv: Sequence[str], engine: Engine) -> ArmMethod | None:
    """The speculation ``argv`` configures, as ``engine`` reads it; None when it does not speculate
    (exactly when the checks say so). A method the theory has no model for is a ConfigError naming it."""
    spec = engine.speculation(argv)
    if spec is None:
        return None
    method = THEORY_METHODS.get(spec.method)
    if method is None:
        raise ConfigError(f"speculative method {spec.label!r}: the theory has no model for this method")
    if method == "draft" and spec.draft_model is None:
        raise ConfigError(f"{spec.label}: a draft method without a draft model (-md PATH)")
    k = spec.k if spec.k is not None else DEFAULT_DRAFT_N
    draft_path = spec.draft_model if method == "draft" else None
    return ArmMethod(method, k, draft_path, spec.label, k_default=spec.k is None or spec.k_default)


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
    wanted = preset_key(text)
    spellings = {preset_key(n): n for n in catalog.names()} | dict(catalog.aliases)
    hits = [k for k in spellings if k and k in wanted]
    return spellings[max(hits, key=len)] if hits else None


def _preset_model(model: str) -> Architecture | None:
    """The preset named by a model id (``Qwen/Qwen3.6-27B``) or contained in its file name."""
    name = longest_contained(models(), model.rsplit("/", 1)[-1])
    return models().get(name) if name else None


def _file_architecture(model: str) -> tuple[Architecture, str, str] | None:
    """What the model's own files say: (shape, kind of source, source with its path)."""
    if model.endswith(".gguf") and Path(model).is_file():
        return architecture_from_gguf(model), "GGUF header", f"GGUF header ({model})"
    config = _config_next_to(model)
    if config is not None:
        return load_hf_config(config), "config.json", f"config.json ({config})"
    return None


def _architecture(model: str, stored: StoredModel | None = None) -> tuple[Architecture, str] | None:
    # The shape stored with the run first: the file may be gone or replaced since (issue 31).
    if stored is not None:
        return stored.arch, f"{stored.source} (stored with the run)"
    found = _file_architecture(model)
    if found is not None:
        return found[0], found[2]
    arch = _preset_model(model)
    return (arch, f"preset {arch.name}") if arch else None


def describe_model(model: str) -> StoredModel | None:
    """``model``'s shape from its own GGUF header or config.json, to store with the run
    (stored.py); None when no file describes it (a hub id, a bad header: the theory says unknown)."""
    try:
        found = _file_architecture(model)
    except (ConfigError, OSError, ValueError):
        return None
    if found is None:
        return None
    p = Path(model)
    return StoredModel(found[0], found[1], p.stat().st_size if p.is_file() else None, _hf_dtype(model))


def run_architectures(model: str, arms: Sequence[Sequence[str]], engine: Engine) -> dict[str, Any]:
    """``architectures.json`` of a run: the target ``model`` and every arm's draft model, keyed by
    the path as the matrix or the arm's flags name it (what the theory later looks up)."""
    paths = [model]
    for argv in arms:
        try:
            spec = arm_method(argv, engine)
        except ConfigError:  # a method the theory has no model for: nothing to ask about
            continue
        if spec is not None and spec.draft_path:
            paths.append(spec.draft_path)
    described = {p: describe_model(p) for p in dict.fromkeys(paths) if p}
    return {p: d.to_dict() for p, d in described.items() if d is not None}


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


def model_weights(
    arch: Architecture, model: str, file_bytes: int | None = None, stored: StoredModel | None = None
) -> Weights:
    """``arch`` at the bytes per weight of ``model`` (see the module docstring for the order);
    with ``stored`` (the run's architectures.json entry) its size and dtype, not the file's now."""
    quant = longest_contained(quants(), Path(model).name)
    if quant:
        q = quants().get(quant)
        return Weights(arch, q.bytes_per_weight, q.name, q.head_bytes_per_weight)
    p = Path(model)
    size = (stored.bytes or file_bytes) if stored else (p.stat().st_size if p.is_file() else file_bytes)
    if size:
        bpw = size / total_params(arch)
        return Weights(arch, bpw, f"{bpw * 8:.2f} bits/weight (file size)")
    dtype = stored.hf_dtype if stored else _hf_dtype(model)
    if dtype:
        q = quants().get(dtype)
        return Weights(arch, q.bytes_per_weight, q.name)
    raise ConfigError(f"cannot tell the weight format of {model!r} (no quant in its name, no file)")


def weights_for(
    model: str, file_bytes: int | None = None, stored: StoredModel | None = None
) -> tuple[Weights, str] | None:
    """A non-lab model path or id as Weights, or None when nothing stored with the run, no GGUF
    header, config.json or preset describes it."""
    found = _architecture(model, stored)
    if found is None:
        return None
    arch, source = found
    return model_weights(arch, model, file_bytes, stored), source


def run_path(run_dir: Path, value: str) -> str:
    """A model path the run named, as the engine found it, whatever folder the report is rendered
    from: a relative path (vLLM reads ``models/x`` against its own working directory) is tried
    against the matrix file's folder, the working directory the run recorded, then the folders
    holding the run directory (``--out runs/x`` from the folder the run was made in, for runs that
    recorded no working directory); unchanged when none holds it (a hub id)."""
    path = Path(value).expanduser()
    if not value or path.is_absolute():
        return str(path) if value else value
    manifest = RunStore(run_dir).manifest()
    bases = [Path(str(manifest["matrix_path"])).parent] if manifest.get("matrix_path") else []
    bases += [Path(str(manifest["cwd"]))] if manifest.get("cwd") else []
    for base in [*bases, *run_dir.resolve().parents]:
        if matrix_path(base, value).exists():
            return str(matrix_path(base, value).resolve())
    return value


def _matrix_model(run_dir: Path) -> tuple[str, str, int | None]:
    """The model as the matrix names it, as the engine found it, and its size (env.json)."""
    store = RunStore(run_dir)
    model = str((store.manifest().get("matrix") or {}).get("model") or "")
    if not model:
        raise ConfigError("the run's matrix names no model")
    size = (store.env().get("model") or {}).get("bytes")
    found = run_path(run_dir, model)
    return model, found, int(size) if isinstance(size, int | float) and size > 0 else None


def model_from_run(run_dir: Path) -> RunModels | None:
    """The run's target (and lab draft) for the theory, or None when nothing describes the model."""
    named, model, size = _matrix_model(run_dir)
    truth = _truth_next_to(model)
    if truth is not None and "target" in truth:
        draft = lab_weights(truth, "draft") if "draft" in truth else None
        return RunModels(lab_weights(truth, "target"), draft, f"lab truth.json next to {model}")
    found = weights_for(model, size, read_stored(run_dir, named))
    return RunModels(found[0], None, found[1]) if found else None


def draft_weights(path: str, stored: StoredModel | None = None) -> Weights:
    """The draft model of an arm (``-md PATH``): a lab draft, the shape stored with the run, its
    GGUF header, a config.json or a preset."""
    truth = _truth_next_to(path)
    if truth is not None and "draft" in truth:
        return lab_weights(truth, "draft")
    found = weights_for(path, stored=stored)
    if found is None:
        raise ConfigError(f"draft model {path!r}: no truth.json, config.json or preset describes it")
    return found[0]


# -- device -------------------------------------------------------------------------------------
def gpu_preset(name: str) -> Gpu:
    """A GPU preset for an nvidia-smi name such as ``NVIDIA GeForce RTX 3090``."""
    text = preset_key(name)
    for word in VENDOR_WORDS:
        text = text.replace(word, "")
    found = longest_contained(gpus(), text)
    if found is None:
        raise ConfigError(f"GPU {name!r} has no preset; known: {', '.join(gpus().names())}")
    return gpus().get(found)


def device_from_run(run_dir: Path) -> Gpu:
    """The run's GPU preset, or for CPU runs the ``cpu`` probe stored while the run ran
    (store/machineprobe.py)."""
    env = RunStore(run_dir).env()
    devices = env.get("gpus") or []
    build = (env.get("engine") or {}).get("build") or {}
    if not devices or build.get("cuda") is False:
        return stored_cpu(run_dir)
    return gpu_preset(str(devices[0].get("name", "")))
