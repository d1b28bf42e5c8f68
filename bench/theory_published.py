"""The theory against every published point it can cite (not a test: no thresholds).

Each point is a public measurement: device, model, quant, method, K and, where the source gives
it, the acceptance (or the mean accepted length). The theory is calibrated on each source's own
baseline (η_bw fitted so the predicted baseline equals the published one, ``predict
--baseline-tok-s``) and then predicts the speculative arm with the engine's named host costs and
verify curve, and the 80 % interval of the terms it does not know for the point
(theory/spread/terms.py). Prints prediction vs measurement per point, the error (measured / predicted −
1), the mean and median absolute error, how many signs (gain or loss) agree, how many
measurements fall inside the interval, and the share of listed points the theory can express;
``--markdown`` prints the table that docs/theory.md carries.

    .venv/bin/python bench/theory_published.py [--markdown]

Two validations. *As fitted*: η_bw is each point's own baseline fit; vLLM's EAGLE-3 host cost per
drafting pass was fitted once on one point listed here (``fit=True``, the K = 2 row of
vllm#20780), so the summary gives the held-out points (all but that one) separately.
*Leave-one-source-out*: each source's points are predicted with the engine tables less every
entry fitted on that source (``fitted_on``, engines/measured/): vllm#20780's EAGLE-3 rows then
have no proposer cost and its band is the unknown engine's. The model's structure was still
chosen with these points in view (the early-stopping drafts, the replay, host sampling), which
no refit undoes. Where a source gives no acceptance, the point says which α it assumes and why
(``alpha_note``) and gives it a band (``alpha_range``). ``UNEXPRESSIBLE`` lists the sources the
theory cannot put a number on, with the reason; they count against the expressible share.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from typing import Any

from specbench.engines import theory_priors
from specbench.theory import alpha_from_acceptance, predict
from specbench.theory.formulas import alpha_from_tokens_per_round
from specbench.theory.measured.engines import Priors
from specbench.theory.speedup import Tree
from specbench.theory.spread.interval import Interval
from specbench.theory.stopping import predict_stopped

THC_3090 = "https://hackmd.io/ODXuOQNzSiyUITz7g9mtBw"  # llama.cpp, one RTX 3090, batch 1, greedy
HIFI_A100 = "https://huggingface.co/fraQtl/Qwen3.6-35B-A3B-Hi-Fi-MTP-runtime"  # llama.cpp, A100-80GB
# The same 3090 report quotes a Qwen3.5-0.8B drafter's own counters: 53.7 % of drafted tokens
# accepted at llama.cpp's default n-max 3, i.e. α ≈ 0.72. It is the only acceptance the 3090 runs give.
ALPHA_3090 = alpha_from_acceptance(0.537, 3)
A35 = ("Qwen3.6-35B-A3B", "RTX 3090", "UD-Q4_K_XL")
# vLLM V1, Llama-3.1-8B-Instruct BF16, batch 1, MT-bench, TPOT 7.07 ms without speculation and the
# mean acceptance length (bonus included) per K for EAGLE-1 and EAGLE-3 heads. The issue names no
# GPU; 141 tok/s of a 16 GB model needs 2.27 TB/s, more than any A100, and the author's runs in
# vllm#16937 are on an H100, so H100 SXM.
VLLM_EAGLE = "https://github.com/vllm-project/vllm/issues/20780"
VLLM_EAGLE_LOAD = "https://github.com/vllm-project/vllm/pull/16035"  # Llama-3-8B EAGLE, H100 (same argument)
SGLANG_70B = "https://github.com/sgl-project/sglang/pull/4716"  # Llama-3.3-70B EAGLE-3 tree, H100 TP8


@dataclass(frozen=True)
class Point:
    """One published measurement: a speculative arm against its own baseline."""

    label: str
    source: str
    model: str
    gpu: str
    quant: str
    method: str
    k: int
    baseline_tok_s: float
    measured_low: float  # speedup, or the low end of a published range
    alpha: float
    alpha_note: str
    measured_high: float | None = None
    draft_model: str | None = None
    draft_quant: str | None = None
    replay: bool = True  # the llama.cpp builds behind these reports restore and replay
    stop: bool = False  # the build stops a draft at its first unsure token (p-min 0.75), c = α
    host_sampling: bool = True  # April 2026 builds sampled the draft model on the host
    n_min: int = 0
    accepted_length: float | None = None  # published mean tokens per round; replaces alpha when given
    tree: Tree | None = None
    tensor_parallel: int = 1
    context: int = 4096
    engine: str = "llama.cpp"
    fit: bool = False  # an engine constant was fitted on this point (engines/measured/)
    alpha_range: tuple[float, float] | None = None  # an estimated α: its band (theory/spread/terms.py)
    acceptance: float | None = None  # a published acceptance A at K: measured, exact

    @property
    def measured(self) -> float:
        """The published speedup (the middle of a published range)."""
        return (self.measured_low + (self.measured_high or self.measured_low)) / 2


DRAFT = {"draft_model": "Qwen3.5-0.8B", "draft_quant": "Q8_0"}
A3090 = "α 0.72: the report's drafter counters, 53.7 % at K = 3"
# Estimated acceptances get a band (theory/spread/terms.py "acceptance"). Both are judgements, not
# measurements: the drafter's counter was read once, at K = 3, on the report's own prompts, and is
# carried to K = 8–32 (±0.05 in α); the n-gram arm has no published acceptance at all (from a
# coin flip to the lab's designed 0.9).
A3090_RANGE = (ALPHA_3090 - 0.05, ALPHA_3090 + 0.05)
NGRAM_RANGE = (0.5, 0.9)


def a3090(label: str, method: str, k: int, low: float, high: float | None = None, **kw: Any) -> Point:
    """A point of the RTX 3090 report (Qwen3.6-35B-A3B UD-Q4_K_XL, baseline 139.9 tok/s)."""
    note = kw.pop("note", A3090)
    kw.setdefault("alpha_range", A3090_RANGE)
    high_ratio = high / 139.9 if high else None
    return Point(label, THC_3090, *A35, method, k, 139.9, low / 139.9, ALPHA_3090, note, high_ratio, **kw)


POINTS = [
    a3090("3090 draft 0.8B, n-min 2, n-max 32", "draft", 32, 65.0, stop=True, n_min=2, **DRAFT),
    a3090("3090 draft 0.8B, defaults, n-max 8", "draft", 8, 55.3, 56.5, stop=True, **DRAFT),
    a3090("3090 draft 0.8B, defaults, n-max 16", "draft", 16, 55.3, 56.5, stop=True, **DRAFT),
    a3090("3090 draft 0.8B, defaults, n-max 32", "draft", 32, 55.3, 56.5, stop=True, **DRAFT),
    a3090(
        "3090 ngram-mod n=24, n-min 48, n-max 64",
        "ngram",
        64,
        85.6,
        note="α 0.72 assumed (none published)",
        alpha_range=NGRAM_RANGE,
    ),
    Point(
        "A100 MTP K=4, A 76.0 %",
        HIFI_A100,
        "Qwen3.6-35B-A3B",
        "A100 80GB",
        "Q4_K_M",
        "mtp",
        4,
        133.61,
        1.489,
        alpha_from_acceptance(0.760, 4),
        "from the published A = 76.0 % at K = 4",
        acceptance=0.760,
    ),
]

_AL = {"eagle": (2.1, 2.29, 2.39, 2.43, 2.45, 2.47), "eagle3": (2.36, 2.79, 3.08, 3.32, 3.46, 3.54)}
_TPOT = {"eagle": (4.37, 4.29, 4.48, 4.71, 4.94, 5.2), "eagle3": (4.32, 4.09, 4.05, 4.13, 4.2, 4.29)}


def vllm_eagle(method: str, k: int) -> Point:
    """One cell of vllm#20780's table (H100, BF16, batch 1, TPOT 7.07 ms without speculation).
    Its EAGLE-3 K = 2 row is the one point vLLM's EAGLE-3 proposer cost was fitted on."""
    al, tpot = _AL[method][k - 2], _TPOT[method][k - 2]
    label = f"H100 vLLM Llama-3.1-8B {'EAGLE-3' if method == 'eagle3' else 'EAGLE-1'} K={k}"
    return Point(
        label, VLLM_EAGLE, "Llama-3.1-8B", "H100 SXM", "BF16", method, k, 1000 / 7.07, 7.07 / tpot,
        alpha_from_tokens_per_round(al, k), f"published accepted length {al}", replay=False,
        host_sampling=False, accepted_length=al, context=512, engine="vLLM",
        fit=method == "eagle3" and k == 2,
    )  # fmt: skip


POINTS += [vllm_eagle(m, k) for m in ("eagle", "eagle3") for k in range(2, 8)]
POINTS += [
    Point(
        f"H100 vLLM Llama-3-8B EAGLE-1 K={k}",
        VLLM_EAGLE_LOAD,
        "Llama-3.1-8B",
        "H100 SXM",
        "BF16",
        "eagle",
        k,
        128.64,
        rate / 128.64,
        alpha_from_tokens_per_round(al, k),
        f"published accepted length {al}",
        replay=False,
        host_sampling=False,
        accepted_length=al,
        context=512,
        engine="vLLM",
    )
    for k, al, rate in ((2, 1.89, 175.49), (4, 2.08, 165.65))
]
POINTS.append(
    Point(
        "8×H100 SGLang Llama-3.3-70B EAGLE-3 tree 8×8, 64 tokens",
        SGLANG_70B,
        "Llama-3.3-70B",
        "H100 SXM",
        "F16",
        "eagle3",
        8,
        88.61,
        234.54 / 88.61,
        alpha_from_tokens_per_round(5.88, 8),
        "published accepted length 5.88",
        replay=False,
        host_sampling=False,
        accepted_length=5.88,
        tree=Tree(top_k=8, tokens=64),
        tensor_parallel=8,
        context=512,
        engine="SGLang",
    )
)

# Cited measurements the theory cannot put a number on, and why (they count as not expressible).
RTX5090 = "https://airelien.dev/en/posts/qwen36-35b-a3b-mtp-249-tps-new-champion/"
UNEXPRESSIBLE = [
    ("H100 SGLang Llama-2-7B EAGLE tree 8×5, 64 tokens (156 -> 297 tok/s)",
     "https://github.com/SafeAILab/EAGLE/pull/173", "no accepted length published"),
    ("H200 SGLang Qwen3-8B / Qwen3-30B-A3B EAGLE-3 (186 -> 365, 147 -> 231 tok/s)",
     "https://github.com/SafeAILab/EAGLE/issues/211", "neither K, tree nor accepted length published"),
    ("RTX 5090 llama.cpp Qwen3.6-35B-A3B / 27B MTP (+6 %, 2-2.5x)", RTX5090, "no acceptance or K published"),
    ("SGLang QwQ-32B EAGLE tp=1 / tp=4 (21 -> 30, 61 -> 59 tok/s)",
     "https://github.com/sgl-project/sglang/issues/6949", "no GPU, K or accepted length published"),
    ("M3 Max llama.cpp Qwen3.5-122B-A10B (20.4 -> 23.5-29.7 tok/s)", THC_3090,
     "neither the drafting method nor K published; the guess decides the sign (a 0.8B draft at"
     " K = 3: 0.90x, MTP: 1.08x, n-gram: 1.16x)"),
]  # fmt: skip


@dataclass(frozen=True)
class Row:
    point: Point
    predicted: float
    breakdown: str
    interval: Interval | None = None

    @property
    def error(self) -> float:
        return self.point.measured / self.predicted - 1.0

    @property
    def covered(self) -> bool:
        """The published speedup lies inside the prediction's interval."""
        return self.interval is not None and self.interval.covers(self.point.measured)


PRIORS = theory_priors()  # what each engine was measured to do (specbench/engines/measured/)
ENGINE_KEYS = {e.name: e.kind for e in PRIORS.engines}  # a point names its engine as people write it


def evaluate(p: Point, priors: Priors | None = None) -> Row:
    """Calibrate η_bw on the point's baseline, then predict its speculative arm with the engine's
    named host costs and verify curve (engines/measured/) and the interval
    from the terms not known for it (theory/spread/terms.py). ``priors``: the tables to use (a
    leave-one-source-out fold passes them without the entries fitted on the held-out source)."""
    kw: dict[str, Any] = {
        "draft_model": p.draft_model,
        "draft_quant": p.draft_quant,
        "replay": p.replay,
        "draft_host_sampling": p.host_sampling,
        "context": p.context,
        "baseline_tok_s": p.baseline_tok_s,
        "engine": ENGINE_KEYS[p.engine],
        "priors": priors or PRIORS,
    }
    # what the source measured is exact (an accepted length, an acceptance); an α it did not
    # publish comes with its band (alpha_range)
    acc: dict[str, Any] = {"alpha": p.alpha}
    if p.accepted_length:
        acc = {"accepted_length": p.accepted_length}
    elif p.acceptance is not None:
        acc = {"acceptance": p.acceptance}
    shape = {"tree": p.tree, "tensor_parallel": p.tensor_parallel}
    pred = predict(p.model, p.gpu, p.quant, p.method, p.k, **acc, **kw, **shape, alpha_range=p.alpha_range)
    b, ms = pred.breakdown, 1e3
    terms = (
        f"K={p.k}: step {b.target_step_s * ms:.1f}, round {b.round_s * ms:.1f} = draft {b.draft_s * ms:.1f}"
        f" + catch-up {b.catchup_s * ms:.1f} + verify {b.verify_s * ms:.1f}"
        f" + snapshots {b.snapshot_s * ms:.1f} + ckpt {b.checkpoint_target_s * ms:.1f}"
        f"/{b.checkpoint_draft_s * ms:.1f} + replay {b.replay_s * ms:.1f} ms"
        f" (draft host {b.draft_host_s * ms:.1f})"
    )
    if not p.stop:
        return Row(p, pred.speedup, terms, pred.interval.speedup if pred.interval else None)
    stopped = predict_stopped(
        p.model, p.gpu, p.quant, p.method, p.k, alpha=p.alpha, stop=p.alpha, n_min=p.n_min,
        alpha_range=p.alpha_range, **kw,
    )  # fmt: skip
    why = f"stops early: mean draft {stopped.mean_draft:.1f}; at full {terms}"
    return Row(p, stopped.speedup, why, stopped.interval)


def leave_one_source_out(points: list[Point]) -> list[Row]:
    """Each source's points predicted with the tables less every entry fitted on that source
    (``fitted_on``, engines/measured/): what the model says of a source it has never seen."""
    rows = []
    for source in dict.fromkeys(p.source for p in points):
        rows += [evaluate(p, PRIORS.without(source)) for p in points if p.source == source]
    return rows


def _measured(p: Point) -> str:
    low, high = f"{p.measured_low:.2f}", f"{(p.measured_high or p.measured_low):.2f}"
    return f"{low}x" if low == high else f"{low}–{high}x"


def _errors(rows: list[Row]) -> str:
    errors = [abs(r.error) for r in rows]
    signs = sum((r.predicted > 1) == (r.point.measured > 1) for r in rows)
    covered = sum(r.covered for r in rows)
    return (
        f"{len(rows)} points: mean absolute error {statistics.fmean(errors) * 100:.1f} %, median"
        f" {statistics.median(errors) * 100:.1f} %, signs right {signs}/{len(rows)}, inside the 80 %"
        f" interval {covered}/{len(rows)} ({covered / len(rows) * 100:.0f} %)"
    )


def summary(rows: list[Row], loso: list[Row] | None = None) -> str:
    """Mean and median absolute error, sign agreement and interval coverage: over the held-out
    points (every point no constant was fitted on), over all, and leave-one-source-out."""
    held = [r for r in rows if not r.point.fit]
    fitted = ", ".join(r.point.label for r in rows if r.point.fit) or "none"
    listed = len(rows) + len(UNEXPRESSIBLE)
    text = (
        f"Held out: {_errors(held)}. All: {_errors(rows)}; expressible {len(rows)}/{listed}"
        f" ({len(rows) / listed * 100:.0f} %). Fitted on: {fitted} (vLLM's EAGLE-3 host cost per"
        " drafting pass, engines/measured/vllm.py); η_bw is each point's own baseline."
    )
    if loso:
        text += f" Leave-one-source-out: {_errors(loso)}."
    return text


COLUMNS = ("point", "engine", "acceptance", "predicted [80 %]", "published", "error",
           "left out: predicted [80 %]", "error", "widest term (left out)")  # fmt: skip


def _cell(r: Row) -> str:
    i = r.interval
    return f"{r.predicted:.2f}x [{i.low:.2f}–{i.high:.2f}]" if i else f"{r.predicted:.2f}x"


def _dominant(r: Row) -> str:
    return (r.interval.dominant_text() if r.interval else None) or "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the docs/theory.md table")
    args = parser.parse_args()
    rows = [evaluate(p) for p in POINTS]
    loso = {r.point.label: r for r in leave_one_source_out(POINTS)}
    if args.markdown:
        print(f"| {' | '.join(COLUMNS)} |")
        print("|---" * len(COLUMNS) + "|")
        for r in rows:
            acc = f"AL {r.point.accepted_length}" if r.point.accepted_length else f"α {r.point.alpha:.2f}"
            label = f"{r.point.label} (**fitted**)" if r.point.fit else r.point.label
            o = loso[r.point.label]
            print(
                f"| {label} | {r.point.engine} | {acc} | {_cell(r)} | {_measured(r.point)}"
                f" | {r.error * 100:+.0f} %{'' if r.covered else ' (outside)'} | {_cell(o)}"
                f" | {o.error * 100:+.0f} %{'' if o.covered else ' (outside)'} | {_dominant(o)} |"
            )
        print("\nNot expressible:\n")
        print("\n".join(f"- {label} ({url}): {why}" for label, url, why in UNEXPRESSIBLE))
        print(f"\n{summary(rows, list(loso.values()))}")
        return
    for r in rows:
        o = loso[r.point.label]
        print(
            f"{r.point.label:55} predicted {_cell(r):22} published {_measured(r.point):12}"
            f" error {r.error * 100:+5.0f} %  left out {_cell(o):22} {o.error * 100:+5.0f} %"
            f"   ({r.breakdown}; {r.point.alpha_note}; widest: {_dominant(o)})"
        )
    for label, url, why in UNEXPRESSIBLE:
        print(f"{label:55} not expressible: {why} ({url})")
    print(summary(rows, list(loso.values())))


if __name__ == "__main__":
    main()
