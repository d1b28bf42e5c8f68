"""Is the acceptance real? ACCEPTANCE_ARTEFACT (100 % on every drafting request, or sources over
the same requests that disagree) and SELF_DRAFT (the draft is the target model itself, so 100 %
is expected and says nothing about a real draft).

Both read the arm's acceptance sources (:mod:`specbench.analysis.evidence.acceptance`); where a
100 % is claimed, the client's own stream is asked whether it confirms it (tokens per chunk on
vLLM, the passes a one-token-per-chunk stream shows on llama.cpp:
:mod:`specbench.analysis.evidence.passes`). A SELF_DRAFT arm gets no ACCEPTANCE_ARTEFACT: its
sentence quotes every source instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis.evidence import passes
from specbench.analysis.evidence.acceptance import COUNTERS, PER_REQUEST, Source, comparable
from specbench.analysis.findings.family import ArmFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.engines.base import Engine
from specbench.store.record import Record
from specbench.store.rundir import file_sha256


class Code(StrEnum):
    ACCEPTANCE_ARTEFACT = "ACCEPTANCE_ARTEFACT"
    SELF_DRAFT = "SELF_DRAFT"


SEVERITY = {Code.ACCEPTANCE_ARTEFACT: Severity.WARNING, Code.SELF_DRAFT: Severity.INFO}
ANCHOR = "acceptance"
SOURCE_TOLERANCE = 0.02  # comparable sources may differ by this much before it is a finding


def check(ev: RunEvidence, arm: str) -> list[Finding]:
    """For an arm configured to speculate: SELF_DRAFT where the draft is the target (100 % is
    expected: said instead of "artefact", quoting every source), else ACCEPTANCE_ARTEFACT."""
    run = ev.run
    args = run.arm_args(arm)
    if not run.engine.speculates(args):
        return []
    found = ev.sources(arm)
    artefacts = acceptance_artefact(arm, run.df, found, run.records, run.cells)
    model = str(run.manifest.get("matrix", {}).get("model", ""))
    selfdraft = self_draft(arm, args, model, run.engine, env=run.env, found=found)
    return [selfdraft] if selfdraft is not None else artefacts


def acceptance_artefact(
    arm: str,
    df: pd.DataFrame,
    sources: Mapping[str, Source],
    records: Sequence[Record] = (),
    cells: Sequence[Mapping[str, Any]] = (),
) -> list[Finding]:
    """Accepted == drafted on every drafting request, or two sources over the same requests disagree.
    ``records`` and ``cells``: the run's, for a one-token-per-chunk stream's passes (passes.py)."""
    out = []
    full = comparable(sources)
    drafting = df[(df["arm"] == arm) & (df["draft_n"].fillna(0) > 0)]
    if len(drafting) >= 3 and bool((drafting["draft_accepted"] == drafting["draft_n"]).all()):
        others = [name for name in full if name != PER_REQUEST]
        agree = all(abs(full[n]["rate"] - 1.0) <= SOURCE_TOLERANCE for n in others)
        check = f"{' and '.join(others)} agree" if others and agree else "no independent source confirms it"
        stream, confirmed = _stream_says(arm, drafting, full.get(COUNTERS), records, cells, df)
        out.append(
            Finding(
                Code.ACCEPTANCE_ARTEFACT,
                (arm,),
                f"{arm}: accepted == drafted on all {len(drafting)} drafting requests ({check}); 100 % "
                "is often a counter that sees only re-verified tokens — "
                + (stream or "check the drafter's own counters."),
                Severity.INFO if confirmed else SEVERITY[Code.ACCEPTANCE_ARTEFACT],
            )
        )
    rates = {name: s["rate"] for name, s in full.items()}
    if len(rates) >= 2 and max(rates.values()) - min(rates.values()) > SOURCE_TOLERANCE:
        detail = ", ".join(f"{k} {v:.3f}" for k, v in rates.items())
        out.append(
            Finding(
                Code.ACCEPTANCE_ARTEFACT,
                (arm,),
                f"{arm}: acceptance sources disagree over the same measured requests ({detail}).",
            )
        )
    return out


def _stream_says(
    arm: str,
    drafting: pd.DataFrame,
    metrics: Source | None,
    records: Sequence[Record],
    cells: Sequence[Mapping[str, Any]],
    df: pd.DataFrame,
) -> tuple[str, bool]:
    """(what the client's stream says of the 100 %, whether it confirms it): tokens per chunk
    where a chunk is a verification step (vLLM), else the passes a one-token-per-chunk stream
    shows in its bursts (llama.cpp; needs the records)."""
    steps = _stream_confirms(drafting, metrics)
    if steps or not records or not passes.one_token_per_chunk(drafting):
        return steps, bool(steps)
    said, sentence = passes.verdict(passes.arm_passes(arm, records, cells, df))
    return sentence, said == "confirms"


STREAM_TOLERANCE = 0.10  # tokens per streamed chunk within this of the counters' tokens per step


def _stream_confirms(drafting: pd.DataFrame, metrics: Source | None) -> str:
    """A sentence when the client's own stream confirms the counters, else "".

    A server that sends each verification step's tokens as one chunk (vLLM) shows its real
    acceptance in the stream: tokens per chunk ≈ 1 + accepted / drafts. A counter that saw only
    re-verified tokens would claim K + 1 per step while the stream shows fewer. llama.cpp sends one
    token per chunk, so there tokens per chunk say nothing: its passes are counted from the
    stream's bursts instead (:mod:`specbench.analysis.evidence.passes`)."""
    if metrics is None or not {"tokens_per_chunk", "output_tokens"} <= set(drafting.columns):
        return ""
    per_step = float(metrics.get("mean_accepted_length", np.nan))
    per_chunk = float(drafting["tokens_per_chunk"].mean())
    if not (np.isfinite(per_step) and np.isfinite(per_chunk)) or per_chunk <= 1.0:
        return ""
    n = drafting["output_tokens"].to_numpy(np.float64)
    expected = float(np.mean(n / (1.0 + (n - 1.0) / per_step)))  # the first token is prefill's chunk
    if not abs(per_chunk / expected - 1.0) <= STREAM_TOLERANCE:
        return ""
    return (
        f"here the stream confirms it: {per_chunk:.2f} tokens per streamed chunk, {expected:.2f} "
        f"expected at the counters' {per_step:.2f} tokens per verification step."
    )


def self_draft(
    arm: str,
    args: Sequence[str],
    model: str,
    engine: Engine,
    env: Mapping[str, Any] | None = None,
    found: Mapping[str, Source] | None = None,
) -> Finding | None:
    """The draft model is the target model itself — the same path, a link to it or a byte-identical
    copy: 100 % acceptance is expected, not an artefact. Content decides: the SHA-256 ``env.json``
    recorded for the arm's draft (``arm_files``: ``same_as_target``), else the two files' own
    SHA-256 where both are on this machine. ``found``: the arm's acceptance sources, quoted."""
    draft = engine.draft_model(list(args))
    if draft is None or not model or not (how := _same_file(draft, model, _recorded(env, arm, draft))):
        return None
    rates = ", ".join(f"{name} {s['rate']:.3f}" for name, s in (found or {}).items())
    return Finding(
        Code.SELF_DRAFT,
        (arm,),
        f"{arm} drafts with the target model itself ({draft}: {how}): acceptance near 100 % is expected "
        + (f"(here {rates}) " if rates else "")
        + "and says nothing about a real draft; with every draft accepted, the speedup measures what a "
        "round costs (K draft passes of the full target model plus one verification pass) against the "
        "K + 1 tokens it yields, not what a smaller draft would gain.",
        SEVERITY[Code.SELF_DRAFT],
    )


def _recorded(env: Mapping[str, Any] | None, arm: str, draft: str) -> bool | None:
    """What ``env.json`` says of the draft file's content: True same SHA-256 as the target, False
    another, None where it recorded nothing for that file (an older run, a ``--flag=value`` form)."""
    target = str(((env or {}).get("model") or {}).get("sha256") or "")
    for rec in ((env or {}).get("arm_files") or {}).get(arm) or []:
        if isinstance(rec, Mapping) and rec.get("path") == draft and rec.get("sha256"):
            same = rec.get("same_as_target")
            return bool(same) if isinstance(same, bool) else (rec["sha256"] == target if target else None)
    return None


def _same_file(a: str, b: str, recorded: bool | None = None) -> str:
    """How the draft ``a`` is the target ``b`` ("" when it is not): by the recorded SHA-256, else by
    path or link, else by the files' own SHA-256 (equal sizes first: models are hundreds of MB)."""
    if recorded is not None:
        return "the SHA-256 recorded in env.json is the target's" if recorded else ""
    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve() or (pa.exists() and pb.exists() and pa.samefile(pb)):
            return "the same file"
        if pa.is_file() and pb.is_file() and pa.stat().st_size == pb.stat().st_size:
            return "a byte-identical copy (same SHA-256)" if file_sha256(pa) == file_sha256(pb) else ""
    except OSError:
        return "the same path" if a == b else ""
    return ""


FAMILY = ArmFamily(Code, SEVERITY, ANCHOR, check)
