"""``specbench lab make``: a target/draft pair plus ``truth.json``, cached by its parameters."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.lab.acceptance import designed_acceptance, mean_accepted_length
from specbench.lab.gguf_model import Arch, ModelShape, weight_bytes, write_model
from specbench.lab.vocab import Vocab, build_vocab, cycle_text, design_maps

TRUTH_VERSION = 2
LAST_TEMPLATE_CHAR = ":"  # the chat template ends with "assistant:", so ":" precedes every answer


def _hybrid(
    n_embd: int, n_layer: int, n_head: int, n_head_kv: int, n_ff: int, state: int, k: int, v: int
) -> ModelShape:
    """A qwen35 shape: 3 Gated DeltaNet layers per full-attention layer, a 4-tap conv."""
    return ModelShape(
        "hybrid", n_embd, n_layer, n_head, n_head_kv, n_ff,
        ssm_d_state=state, ssm_n_group=k, ssm_n_v_head=v, ssm_d_conv=4, full_attn_interval=4,
    )  # fmt: skip


# Sizes: "tiny" for tests (files of a few MB), "small" (tens of MB), "membound" makes CPU decode
# memory-bound (hundreds of MB): verifying K+1 tokens then costs about one step on the dense model.
# f16 throughout: llama.cpp's AMX path (native builds on AMX CPUs) crashed on Q8_0 weights here.
# hybrid: 128-wide DeltaNet heads (Qwen3.5's) from "small" up, so each speculative checkpoint
# copies MiBs of recurrent state.
PRESETS: dict[str, dict[str, ModelShape]] = {
    "tiny": {
        "dense": ModelShape("dense", n_embd=128, n_layer=2, n_head=4, n_head_kv=2, n_ff=256),
        "moe": ModelShape("moe", 128, 2, 4, 2, 256, n_expert=128, n_expert_used=8, n_ff_exp=32),
        "hybrid": _hybrid(128, 4, 2, 1, 256, state=32, k=2, v=4),
        "draft": ModelShape("dense", n_embd=128, n_layer=1, n_head=2, n_head_kv=1, n_ff=128),
    },
    "small": {
        "dense": ModelShape("dense", n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1536),
        "moe": ModelShape("moe", 512, 4, 8, 4, 1536, n_expert=128, n_expert_used=8, n_ff_exp=128),
        "hybrid": _hybrid(512, 8, 4, 2, 1536, state=128, k=4, v=8),
        "draft": ModelShape("dense", n_embd=128, n_layer=1, n_head=2, n_head_kv=1, n_ff=256),
    },
    "membound": {
        "dense": ModelShape("dense", n_embd=1024, n_layer=16, n_head=16, n_head_kv=4, n_ff=4096),
        "moe": ModelShape("moe", 768, 6, 12, 4, 3072, n_expert=128, n_expert_used=8, n_ff_exp=128),
        "hybrid": _hybrid(1024, 16, 8, 2, 3584, state=128, k=8, v=16),
        "draft": ModelShape("dense", n_embd=256, n_layer=2, n_head=4, n_head_kv=2, n_ff=512),
    },
    # "gpu": a dense target whose decode is memory-bound on an H100/H200 (docs/gpu.md): 5.1 GB of
    # f16 weights, 1.1 ms a token at 4.8 TB/s, against ~0.7 ms of kernel launches the first H200
    # run measured; "membound" (471 MB) is launch-bound there. Its 4-layer draft is ~2 % of the
    # bytes, as real drafts are. MoE and hybrid stay at membound's shapes: the kit's lease has time
    # to make one 5 GB model (~100 s on the device), not three.
    "gpu": {
        "dense": ModelShape("dense", n_embd=4096, n_layer=16, n_head=32, n_head_kv=8, n_ff=11008),
        "moe": ModelShape("moe", 768, 6, 12, 4, 3072, n_expert=128, n_expert_used=8, n_ff_exp=128),
        "hybrid": _hybrid(1024, 16, 8, 2, 3584, state=128, k=8, v=16),
        "draft": ModelShape("dense", n_embd=1024, n_layer=4, n_head=16, n_head_kv=4, n_ff=2816),
    },
}


@dataclass(frozen=True)
class LabSpec:
    """Everything that determines a lab pair; its hash names the cache entry."""

    arch: Arch = "dense"
    alpha: float = 0.8
    size: str = "tiny"
    seed: int = 0
    n_extra_tokens: int = 512
    n_experts: int | None = None
    top_k: int | None = None
    incompatible_draft: bool = False

    def shapes(self) -> tuple[ModelShape, ModelShape]:
        if self.size not in PRESETS:
            raise ConfigError(f"--size: unknown preset {self.size!r}; known: {', '.join(PRESETS)}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"--alpha: must be in [0, 1], got {self.alpha}")
        target, draft = PRESETS[self.size][self.arch], PRESETS[self.size]["draft"]
        if self.arch == "moe":
            n_exp = self.n_experts or target.n_expert
            top_k = self.top_k or target.n_expert_used
            if not 0 < top_k <= n_exp:
                raise ConfigError(f"--top-k: must be in 1..{n_exp} (the expert count), got {top_k}")
            target = replace(target, n_expert=n_exp, n_expert_used=top_k)
        return target, draft

    def key(self) -> str:
        """Hash of the spec *and* the shapes it resolves to: changing a preset makes a new model."""
        shapes = [s.as_dict() for s in self.shapes()]
        blob = json.dumps({**self.__dict__, "shapes": shapes, "v": TRUTH_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def make_pair(spec: LabSpec, out: Path) -> Path:
    """Write ``target.gguf``, ``draft.gguf`` and ``truth.json`` into ``out``; return truth.json."""
    target_shape, draft_shape = spec.shapes()
    out.mkdir(parents=True, exist_ok=True)
    vocab = build_vocab(spec.n_extra_tokens)
    maps = design_maps(vocab, spec.alpha, spec.seed)
    write_model(out / "target.gguf", target_shape, vocab, maps.target, seed=spec.seed + 1)
    draft_vocab = _incompatible(vocab) if spec.incompatible_draft else vocab
    write_model(out / "draft.gguf", draft_shape, draft_vocab, maps.draft, seed=spec.seed + 2)
    truth = _truth(spec, vocab, maps, target_shape, draft_shape)
    path = out / "truth.json"
    path.write_text(json.dumps(truth, indent=1))
    return path


def cached_pair(spec: LabSpec, root: Path) -> Path:
    """The pair for ``spec`` under ``root/<key>``, made once; returns its directory."""
    out = root / f"{spec.arch}-a{spec.alpha:g}-{spec.size}-{spec.key()}"
    return build_once(out, lambda folder: make_pair(spec, folder))


def build_once(out: Path, make: Callable[[Path], object]) -> Path:
    """``out``, made by ``make(folder)`` unless its ``truth.json`` exists. Built beside and renamed
    into place: two processes (parallel test sessions, a demo next to a test run) never read a
    half-written pair; the loser of the race drops its copy."""
    if (out / "truth.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        make(tmp)
        try:
            os.rename(tmp, out)
        except OSError:
            if not (out / "truth.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _incompatible(vocab: Vocab) -> Vocab:
    """Same texts, but BOS and EOS ids swapped: llama.cpp's compatibility check compares the ids,
    rejects the pair, and the server carries on without speculation (docs/mistakes.md, mistake 1)."""
    return replace(vocab, bos=vocab.eos, eos=vocab.bos)


def _truth(spec: LabSpec, vocab: Vocab, maps: Any, tgt: ModelShape, dft: ModelShape) -> dict[str, Any]:
    start = vocab.pieces.index(LAST_TEMPLATE_CHAR)
    return {
        "truth_version": TRUTH_VERSION,
        "spec": spec.__dict__,
        "alpha": spec.alpha,
        "alpha_realised": maps.alpha_realised,
        "vocab_size": vocab.size,
        "cycle_length": len(maps.cycle),
        "target": {**tgt.as_dict(), **weight_bytes(tgt, vocab.size)},
        "draft": {**dft.as_dict(), **weight_bytes(dft, vocab.size)},
        "designed_acceptance": {str(k): designed_acceptance(spec.alpha, k) for k in (1, 2, 4, 8, 16)},
        "mean_accepted_length": {str(k): mean_accepted_length(spec.alpha, k) for k in (1, 2, 4, 8, 16)},
        "last_template_token": start,
        "answer_text": cycle_text(vocab, maps, start, len(maps.cycle)),
        "cycle": maps.cycle,
        "agree": [int(maps.agree[t]) for t in range(vocab.size)],
        "target_map": maps.target,
    }
