"""The lab pairs as Hugging Face config.json files, for predictions made without a run, and the
H200 measurements of issue #43 as data (2026-12-04, GPU kit, lab ``gpu`` pair, C = 1, 6 prompts
× 128 tokens, 4 launches an arm; /work/shared/gpu-runs/2026-12-04-h200/)."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.lab.make import PRESETS

LAB_VOCAB = 866  # the lab vocabulary (build_vocab with 512 extra tokens), as the run's GGUF header says

# measured on the H200: baseline decode rate, and per arm (K, acceptance A, speedup [95 % CI])
H200_BASELINE_TOK_S = 454.1
H200_CONTEXT = 247  # the baseline's median prompt + half the output
H200_ARMS = {"draft4": (4, 0.518, 1.17, 1.05, 1.30), "draft8": (8, 0.343, 1.15, 0.95, 1.39)}


def lab_config(folder: Path, size: str, role: str) -> str:
    """``PRESETS[size][role]`` (a dense lab model, f16) as ``folder/<size>-<role>/config.json``."""
    shape = PRESETS[size][role]
    config = {
        "_name_or_path": f"lab {size} {role}",
        "model_type": "llama",
        "num_hidden_layers": shape.n_layer,
        "hidden_size": shape.n_embd,
        "num_attention_heads": shape.n_head,
        "num_key_value_heads": shape.n_head_kv,
        "intermediate_size": shape.n_ff,
        "vocab_size": LAB_VOCAB,
        "torch_dtype": "float16",
    }
    path = folder / f"{size}-{role}" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return str(path)
