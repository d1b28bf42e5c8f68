"""What a run will do and roughly how long it will take, before anything is launched.

A 60-request run on a CPU can take twelve minutes; the user should know that before pressing
enter. The plan counts what the matrix asks for (server launches per arm, measured and warm-up
requests, prompts by category) and estimates the wall time from, in order of trust:

1. a finished earlier run of the same model on this machine (a run directory beside ``--out``):
   its wall time per generated token, launches included, times the tokens this run asks for;
2. the model file's size and a short memory-bandwidth probe, for llama.cpp on a CPU: decode is
   memory-bound there, so one token costs about one read of the weights (``bytes / bandwidth``),
   and a launch about one read of the file from disk;
3. nothing: the plan says it has no basis instead of guessing.

``plan.json`` in the run directory keeps the plan next to the measurements it predicted.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from specbench.analysis.metrics import output_tokens
from specbench.config import Matrix, RequestSpec, RunSpec
from specbench.progress import clock_text

LAUNCH_S = 3.0  # server start, health checks and /metrics scrapes, beyond reading the weights
DISK_BYTES_S = 1e9  # reading a model file that is not yet in the page cache
GPU_FLAGS = frozenset({"-ngl", "--gpu-layers", "--n-gpu-layers"})  # offloaded: not a CPU estimate
PROBE_BYTES = 64 * 1024 * 1024  # ~0.1 s of copying: enough to tell a laptop from a server
# llama.cpp's CPU decode reads the weights at about 60 % of a plain copy's bandwidth: the README's
# dense lab model (471 MB) decodes at ~21 tok/s on a 2-core machine that copies at ~18 GB/s.
DECODE_EFFICIENCY = 0.6


@dataclass(frozen=True)
class Estimate:
    seconds: float | None
    basis: str


@dataclass(frozen=True)
class Plan:
    """The counts a run will perform and its estimated wall time (seconds, or None)."""

    arms: list[str]
    repeats: int
    launches: dict[str, int]
    requests: int  # measured, all cells
    warmups: int  # warm-up requests, all cells (stored, excluded from statistics)
    per_cell: int
    concurrency: int
    max_tokens: list[int]
    prompts: dict[str, list[str]]  # category → prompt ids
    forward_probe: bool
    output_tokens: int  # at most, warm-ups included
    estimate: Estimate
    commands: dict[str, list[str]] = field(default_factory=dict)
    #: workload → (requests per launch, requests in flight), when a matrix names several
    workloads: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: what the run would do other than the matrix seems to ask (e.g. an arm that cannot speculate)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _workload_lines(self) -> list[str]:
        if not self.workloads:
            return []
        each = "; ".join(f"{w} {n} requests, {c} in flight" for w, (n, c) in self.workloads.items())
        return [f"workloads ({len(self.workloads)}, one after the other in each launch): {each}"]

    def lines(self) -> list[str]:
        """The plan for a terminal or a log, one fact per line."""
        launches = sum(self.launches.values())
        tokens = "/".join(str(n) for n in self.max_tokens)
        out = [
            f"arms: {', '.join(self.arms)} ({len(self.arms)} × {self.repeats} repeats = {launches} server "
            "launches, arms interleaved)",
            f"requests: {self.requests} measured + {self.warmups} warm-up ({self.per_cell} per launch, "
            f"{self.concurrency} in flight, up to {tokens} output tokens each)",
            *self._workload_lines(),
            f"prompts ({sum(len(v) for v in self.prompts.values())}): "
            + "; ".join(f"{cat} {len(ids)} ({', '.join(ids)})" for cat, ids in self.prompts.items()),
        ]
        if self.forward_probe:
            out.append("forward probe: timed prefills of 1..65 tokens in each baseline launch")
        when = f"≈ {clock_text(self.estimate.seconds)}" if self.estimate.seconds is not None else "unknown"
        warned = [f"warning: {w}" for w in self.warnings]
        return [*out, f"estimated wall time: {when} ({self.estimate.basis})", *warned]


def _workloads(requests: tuple[RequestSpec, ...], default: int) -> dict[str, tuple[int, int]]:
    counts = Counter(r.workload for r in requests if r.workload)
    if len(counts) < 2:
        return {}
    flight = {r.workload: r.concurrency or default for r in requests if r.workload}
    return {name: (n, flight[name]) for name, n in counts.items()}


def make_plan(
    matrix: Matrix,
    cells: list[RunSpec],
    out: Path,
    commands: dict[str, list[str]] | None = None,
    probe: bool = True,
    engine_probes: bool = True,
    warnings: list[str] | None = None,
) -> Plan:
    """Count ``cells`` and estimate their wall time (see the module docstring); ``probe`` False
    skips the bandwidth probe, ``engine_probes`` False: the engine has no forward probe."""
    first = cells[0] if cells else None
    requests: tuple[RequestSpec, ...] = first.requests if first else ()
    tokens = sum(sum(r.max_tokens for r in (*c.requests, *c.warmup)) for c in cells)
    return Plan(
        arms=list(matrix.arms),
        repeats=matrix.repeats,
        launches=dict(Counter(c.arm for c in cells)),
        requests=sum(len(c.requests) for c in cells),
        warmups=sum(len(c.warmup) for c in cells),
        per_cell=len(requests),
        concurrency=first.concurrency if first else 1,
        max_tokens=sorted({r.max_tokens for r in requests}),
        prompts=_by_category(requests),
        forward_probe=engine_probes and matrix.forward_probe and matrix.baseline in matrix.arms,
        output_tokens=tokens,
        estimate=estimate(matrix, len(cells), tokens, out, probe),
        commands=commands or {},
        workloads=_workloads(requests, first.concurrency if first else 1),
        warnings=warnings or [],
    )


def _by_category(requests: tuple[RequestSpec, ...]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for r in requests:
        ids = groups.setdefault(r.category, [])
        if r.prompt_id not in ids:
            ids.append(r.prompt_id)
    return dict(sorted(groups.items()))


def estimate(matrix: Matrix, launches: int, tokens: int, out: Path, probe: bool = True) -> Estimate:
    """Wall time for ``launches`` server starts generating at most ``tokens`` tokens."""
    previous = previous_rate(matrix.model, out)
    if previous is not None:
        seconds_per_token, run = previous
        return Estimate(
            tokens * seconds_per_token,
            f"from {run.name} on this machine: {seconds_per_token * 1000:.0f} ms per generated token, "
            "launches included",
        )
    model = Path(matrix.model)
    if matrix.engine == "llamacpp" and probe and model.is_file() and not _all_args(matrix) & GPU_FLAGS:
        return _from_model_size(model, launches, tokens)
    return Estimate(
        None, "no finished run of this model on this machine yet; the next plan will use this one"
    )


def _all_args(matrix: Matrix) -> set[str]:
    return {a for arm in matrix.arms for a in matrix.arm_args(arm)}


def _from_model_size(model: Path, launches: int, tokens: int) -> Estimate:
    from specbench.theory.hardware import probe_cpu

    size = model.stat().st_size
    per_token_bytes, read = bytes_per_token(model)
    copy = probe_cpu(PROBE_BYTES, reps=2).bandwidth
    bandwidth = copy * DECODE_EFFICIENCY
    per_token, per_launch = per_token_bytes / bandwidth, LAUNCH_S + size / DISK_BYTES_S
    return Estimate(
        launches * per_launch + tokens * per_token,
        f"CPU decode of a {size / 1e6:.0f} MB model, {read}, at {bandwidth / 1e9:.1f} GB/s "
        f"({DECODE_EFFICIENCY * 100:.0f} % of the {copy / 1e9:.1f} GB/s copy bandwidth measured just now), "
        "at baseline speed, prefill not counted: a rough guide",
    )


def bytes_per_token(model: Path) -> tuple[float, str]:
    """Bytes one decoded token reads, and how that was found: a MoE model reads only its routed
    experts (8 of 128 make a 1 GB file decode like a ~0.1 GB one), so its file size misleads."""
    from specbench.errors import ConfigError
    from specbench.theory.arch import active_params, total_params
    from specbench.theory.gguf_header import architecture_from_gguf

    size = model.stat().st_size
    try:
        arch = architecture_from_gguf(model)
    except (ConfigError, OSError, ValueError):  # not a GGUF we can read: every weight, to be safe
        return float(size), "reading every weight per token"
    if not arch.experts:
        return float(size), "reading every weight per token"
    share = active_params(arch) / total_params(arch)
    return (
        size * share,
        f"reading {share * 100:.0f} % of its weights per token ({arch.top_k} of {arch.experts} experts)",
    )


def previous_rate(model: str, out: Path) -> tuple[float, Path] | None:
    """Seconds per generated token (launches included) of the newest finished, never resumed
    run of ``model`` on this host among ``out`` and its siblings; None if there is none."""
    host = platform.node()
    found: list[tuple[str, float, Path]] = []
    for folder in {out, *(out.parent.iterdir() if out.parent.is_dir() else ())}:
        info = _rate(folder, model, host)
        if info is not None:
            found.append((*info, folder))
    if not found:
        return None
    _, rate, run = max(found)
    return rate, run


def _rate(folder: Path, model: str, host: str) -> tuple[str, float] | None:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    same = manifest.get("host") == host and (manifest.get("matrix") or {}).get("model") == model
    started, finished = manifest.get("started_at"), manifest.get("finished_at")
    if not same or not started or not finished or manifest.get("resumed_at"):
        return None
    wall = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    tokens = sum(_tokens(line) for line in _lines(folder / "records.jsonl"))
    return (finished, wall / tokens) if tokens > 0 and wall > 0 else None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _tokens(line: str) -> float:
    try:
        value = output_tokens(json.loads(line))
    except ValueError:
        return 0.0
    return value if value == value else 0.0  # NaN: a failed request generated nothing we know of


def write_plan(plan: Plan, run_dir: Path) -> Path:
    """``run_dir/plan.json``: the plan beside the measurements (rewritten on --resume)."""
    path = run_dir / "plan.json"
    path.write_text(json.dumps(plan.to_dict(), indent=1) + "\n")
    return path


def read_plan(run_dir: Path) -> Plan:
    data = json.loads((run_dir / "plan.json").read_text())
    return Plan(**{**data, "estimate": Estimate(**data["estimate"])})
