"""``specbench lab make --format hf``: a Hugging Face target/draft pair for vLLM, and truth.json.

The same designed token maps as the GGUF pairs (:mod:`specbench.lab.vocab`), written as two
``LlamaForCausalLM`` folders that share one tokenizer: ``target/`` and ``draft/``. vLLM serves
``target/`` and drafts with ``{"model": "<pair>/draft", ...}``; on the CPU backend both are f32.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.lab.acceptance import designed_acceptance, mean_accepted_length
from specbench.lab.gguf_model import ModelShape
from specbench.lab.hf_model import write_hf_model
from specbench.lab.make import LAST_TEMPLATE_CHAR, build_once
from specbench.lab.prompts import cycle_prompt
from specbench.lab.vocab import TokenMaps, build_vocab, cycle_text, design_maps

HF_TRUTH_VERSION = 1

# 64-wide heads: a size every vLLM CPU attention backend accepts. f32: the CPU backend's dtype.
HF_PRESETS: dict[str, tuple[ModelShape, ModelShape]] = {
    "tiny": (
        ModelShape("dense", n_embd=256, n_layer=2, n_head=4, n_head_kv=2, n_ff=512, dtype="f32"),
        ModelShape("dense", n_embd=128, n_layer=1, n_head=2, n_head_kv=1, n_ff=256, dtype="f32"),
    ),
    "small": (
        ModelShape("dense", n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1536, dtype="f32"),
        ModelShape("dense", n_embd=128, n_layer=1, n_head=2, n_head_kv=1, n_ff=256, dtype="f32"),
    ),
}


@dataclass(frozen=True)
class HfLabSpec:
    """Everything that determines an HF lab pair; its hash names the cache entry."""

    alpha: float = 0.8
    size: str = "tiny"
    seed: int = 0
    n_extra_tokens: int = 512

    def shapes(self) -> tuple[ModelShape, ModelShape]:
        if self.size not in HF_PRESETS:
            raise ConfigError(f"--size: {self.size!r} has no HF preset; known: {', '.join(HF_PRESETS)}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"--alpha: must be in [0, 1], got {self.alpha}")
        return HF_PRESETS[self.size]

    def key(self) -> str:
        shapes = [s.as_dict() for s in self.shapes()]
        blob = json.dumps({**asdict(self), "shapes": shapes, "v": HF_TRUTH_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def make_hf_pair(spec: HfLabSpec, out: Path) -> Path:
    """Write ``target/``, ``draft/`` and ``truth.json`` into ``out``; return truth.json."""
    target_shape, draft_shape = spec.shapes()
    vocab = build_vocab(spec.n_extra_tokens)
    maps = design_maps(vocab, spec.alpha, spec.seed)
    write_hf_model(out / "target", target_shape, vocab, maps.target, seed=spec.seed + 1)
    write_hf_model(out / "draft", draft_shape, vocab, maps.draft, seed=spec.seed + 2)
    start = vocab.pieces.index(LAST_TEMPLATE_CHAR)
    truth = _truth(spec, maps, target_shape, draft_shape)
    truth |= {
        "vocab_size": vocab.size,
        "last_template_token": start,
        "answer_text": cycle_text(vocab, maps, start, len(maps.cycle)),
    }
    path = out / "truth.json"
    path.write_text(json.dumps(truth, indent=1))
    _write_prompts(out / "prompts.jsonl", truth)
    return path


PROMPTS = 4
ANSWER = 128  # characters (= lab tokens) of the answer each prompt quotes


def _write_prompts(path: Path, truth: dict[str, Any]) -> None:
    """Prompts quoting the target's answer (a ``prompt_file`` for matrices), so an n-gram arm has
    something to look up; the draft-model arm's acceptance does not depend on the prompt."""
    rows = [
        {
            "id": f"lab-cycle-{i}",
            "category": "repetitive",
            "prompt": cycle_prompt(truth, ANSWER, variant=i),
        }
        for i in range(PROMPTS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _truth(spec: HfLabSpec, maps: TokenMaps, tgt: ModelShape, dft: ModelShape) -> dict[str, Any]:
    return {
        "truth_version": HF_TRUTH_VERSION,
        "format": "hf",
        "spec": asdict(spec),
        "alpha": spec.alpha,
        "alpha_realised": maps.alpha_realised,
        "cycle_length": len(maps.cycle),
        "target": {**tgt.as_dict(), "folder": "target"},
        "draft": {**dft.as_dict(), "folder": "draft"},
        "designed_acceptance": {str(k): designed_acceptance(spec.alpha, k) for k in (1, 2, 3, 4, 8)},
        "mean_accepted_length": {str(k): mean_accepted_length(spec.alpha, k) for k in (1, 2, 3, 4, 8)},
        "cycle": maps.cycle,
        "agree": [int(a) for a in maps.agree],
        "target_map": maps.target,
    }


def cached_hf_pair(spec: HfLabSpec, root: Path) -> Path:
    """The pair for ``spec`` under ``root/hf-…-<key>``, made once (:func:`make.build_once`);
    returns its directory."""
    return build_once(root / f"hf-a{spec.alpha:g}-{spec.size}-{spec.key()}", lambda d: make_hf_pair(spec, d))


def vllm_walk(truth: dict[str, Any], max_tokens: int, k: int) -> dict[str, Any]:
    """The counters a vLLM draft-model arm must report for one greedy request on this pair.

    vLLM's scheduler verifies a full draft of ``k`` tokens at every decode step (it never schedules
    a partial draft, even on the last step), starting after the prefill's first token; each step
    accepts the longest agreeing prefix and adds the bonus token. Returns drafts (verify steps),
    draft_tokens, accepted and accepted per draft position.
    """
    target, agree = truth["target_map"], truth["agree"]
    tok, n_gen = target[truth["last_template_token"]], 1
    drafts, accepted, per_pos = 0, 0, [0] * k
    while n_gen < max_tokens:
        a = 0
        while a < k and agree[tok]:
            tok, a = target[tok], a + 1
        tok = target[tok]
        for i in range(a):
            per_pos[i] += 1
        drafts, accepted, n_gen = drafts + 1, accepted + a, n_gen + a + 1
    return {"drafts": drafts, "draft_tokens": drafts * k, "accepted": accepted, "per_position": per_pos}
