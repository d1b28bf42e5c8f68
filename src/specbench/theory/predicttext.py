"""A :class:`~specbench.theory.speedup.Prediction` as the text ``specbench predict`` prints:
the two rates, the speedup, and where a round's time and bytes go."""

from __future__ import annotations

from specbench.theory.speedup import Prediction


def _bound(bound: str) -> str:
    if bound == "curve":
        return "the engine's measured curve"
    return "measured" if bound == "measured" else f"{bound}-bound"


def _fmt_bytes(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def format_prediction(p: Prediction) -> str:
    """Human-readable summary of a Prediction."""
    b = p.breakdown
    ms = 1e3
    draft = f" (draft {p.draft_model})" if p.draft_model else ""
    lines = [
        f"{p.model} on {p.gpu}, {p.quant}, {p.method}{draft}, K={p.draft_max},"
        f" C={p.concurrency}, ctx={p.context}",
        f"  baseline    {p.baseline_tok_s:8.1f} tok/s"
        f"   step {b.target_step_s * ms:.2f} ms ({_bound(b.bound)})",
        f"  speculative {p.spec_tok_s:8.1f} tok/s   speedup {p.speedup:.2f}x"
        f" ({(p.speedup - 1) * 100:+.0f} %)",
        f"  acceptance  A={b.acceptance:.3f}  alpha={b.alpha:.3f}  tokens/round={b.tokens_per_round:.2f}",
        f"  round       {b.round_s * ms:.2f} ms = draft {b.draft_s * ms:.2f}"
        f" + catch-up {b.catchup_s * ms:.2f} + verify {b.verify_s * ms:.2f} ({_bound(b.verify_bound)})"
        f" + snapshots {b.snapshot_s * ms:.2f} + checkpoint {b.checkpoint_target_s * ms:.2f}"
        f" (target) + {b.checkpoint_draft_s * ms:.2f} (draft) + replay {b.replay_s * ms:.2f}"
        f"{f' + drafted-token host work {b.drafted_s * ms:.2f}' if b.drafted_s else ''}"
        f"{f' + speculating-pass host work {b.spec_pass_s * ms:.2f}' if b.spec_pass_s else ''}"
        f" + overhead {b.overhead_s * ms:.2f}",
        f"  launch      {b.launch_s * ms:.2f} ms of the drafting is the drafter's fixed launch latency",
        f"  bytes       step {_fmt_bytes(b.step_bytes)}, verify {_fmt_bytes(b.verify_bytes)}"
        f" ({b.verify_bytes / b.step_bytes:.2f}x), draft pass {_fmt_bytes(b.draft_bytes)}",
    ]
    if p.interval is not None:
        lines += _interval_lines(p)
    if b.experts_touched_step:
        ratio = b.experts_touched_verify / b.experts_touched_step
        lines.append(
            f"  experts     {b.experts_touched_step:.1f} per layer per step, "
            f"{b.experts_touched_verify:.1f} when verifying ({ratio:.1f}x)"
        )
    mib = b.checkpoint_bytes / 2**20
    if b.snapshot_s:
        lines.append(
            f"  snapshots   {p.draft_max} x {mib:.1f} MiB of recurrent state per verify, on the device"
        )
    elif b.checkpoint_s:
        lines.append(f"  checkpoint  {mib:.1f} MiB of recurrent state per round, over the host link")
    return "\n".join(lines)


def _interval_lines(p: Prediction) -> list[str]:
    """``interval    ×1.44 [1.25–1.68] (80 %) …`` and the term that dominates its width."""
    assert p.interval is not None
    i = p.interval
    base = i.baseline_tok_s
    lines = [
        f"  interval    speedup {i.speedup.text()}, baseline {base.text(1, '')} tok/s"
        " (80 %, from the terms not known for this setup)"
    ]
    if i.dominant:
        lines.append(f"  widest      {i.dominant}")
    return lines
