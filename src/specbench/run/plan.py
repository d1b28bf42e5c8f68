"""What a run will do and roughly how long it will take, before anything is launched.

A 60-request run on a CPU can take twelve minutes; the user should know that before pressing
enter. The plan counts what the matrix asks for (server launches per arm, measured and warm-up
requests, prompts by category) and estimates the wall time from, in order of trust:

1. a finished earlier run of the same model, engine and arm arguments on this machine (a run
   directory beside ``--out``) that can serve as a basis (:mod:`specbench.run.planbasis`: no
   failed arm, enough measured requests, few failed): its wall time per generated token, launches
   included, times the tokens this run asks for; where its records carry the engine's prefill
   timings, prefill is split off and scaled by this run's prompt tokens instead. A run with other
   flags is no basis: "449 ms per generated token" borrowed from a sibling run with other flags
   said 13:29 for a run of 1:14;
2. the model file's size and a short probe of this machine, for llama.cpp on a CPU: decode is
   memory-bound there, so one token costs about one read of the weights (``bytes / bandwidth``);
   prefill is compute-bound, about 2 FLOPs per weight per prompt token (``2·params / FLOP rate``);
   a launch costs about one read of the file from disk;
3. nothing: the plan says it has no basis instead of guessing.

For a CPU decode, either is scaled by the load measured now (:mod:`specbench.run.planload`), and
the basis text says by how much and why. The run checks the estimate's pace after its first launch
(:mod:`specbench.run.pace`).

A ``repeats: auto`` plan is a range: from the verdict's minimum (three launches per arm) up to
``max_repeats`` launches per arm, or ``max_minutes`` when that comes first.

``plan.json`` in the run directory keeps the plan next to the measurements it predicted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specbench.analysis.launches import MIN_LAUNCHES
from specbench.engines import ENGINES
from specbench.matrix.config import Cell, Matrix, RequestSpec
from specbench.run.machineload import cpu_room
from specbench.run.planbasis import estimated_prompt_tokens, prefill_rate, previous_rate
from specbench.run.planload import engine_threads, load_scale, load_then
from specbench.run.progress import clock_text
from specbench.store.safeio import write_atomic

LAUNCH_S = 3.0  # server start, health checks and /metrics scrapes, beyond reading the weights
DISK_BYTES_S = 1e9  # reading a model file that is not yet in the page cache
PROBE_BYTES = 64 * 1024 * 1024  # ~0.1 s of copying: enough to tell a laptop from a server
# llama.cpp's CPU decode reads the weights at about 60 % of a plain copy's bandwidth: the README's
# dense lab model (471 MB) decodes at ~21 tok/s on a 2-core machine that copies at ~18 GB/s.
DECODE_EFFICIENCY = 0.6
# Prefill is a batched matmul: llama.cpp's CPU prefill reaches about half the float32 matmul rate
# numpy measures (the "small" f16 lab model, 25.6 M weights, ~1400-token prompts on a busy 2-core
# machine: 208–282 tok/s, 0.51–0.59 of numpy's 20–24 GFLOP/s measured alongside).
PREFILL_EFFICIENCY = 0.5


@dataclass(frozen=True)
class Estimate:
    """Wall time in seconds (None: no basis); for ``repeats: auto`` a range ``low`` … ``seconds``
    whose ``cap`` says what bounds it."""

    seconds: float | None
    basis: str
    low: float | None = None
    cap: str = ""
    #: seconds per output token of the whole planned work (launches and prefill spread over it):
    #: the pace the run checks its first launch against (specbench.run.pace)
    per_token: float | None = None

    def text(self) -> str:
        if self.seconds is None:
            return "unknown"
        if self.low is None:
            return f"≈ {clock_text(self.seconds)}"
        if clock_text(self.low) == clock_text(self.seconds):
            return f"≈ {clock_text(self.seconds)}, {self.cap}"
        return f"≈ {clock_text(self.low)} to {clock_text(self.seconds)}, {self.cap}"


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
    #: a sweep's phases in the order they run: (phase, requests per launch, requests in flight)
    levels: list[tuple[str, int, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _workload_lines(self) -> list[str]:
        if not self.workloads:
            return []
        each = "; ".join(f"{w} {n} requests, {c} in flight" for w, (n, c) in self.workloads.items())
        return [f"workloads ({len(self.workloads)}, one after the other in each launch): {each}"]

    def _level_lines(self) -> list[str]:
        """A sweep's levels, each an operating point judged on its own requests (issue 40)."""
        if not self.levels:
            return []
        each = "; ".join(f"{phase}: {n} requests, {c} in flight" for phase, n, c in self.levels)
        return [f"levels ({len(self.levels)}, one after the other in each launch, each judged alone): {each}"]

    def _flight(self) -> str:
        flights = sorted({c for _, _, c in self.levels})
        if len(flights) > 1:
            return f"{'/'.join(map(str, flights))} in flight by level"
        return f"{flights[0] if flights else self.concurrency} in flight"

    def lines(self) -> list[str]:
        """The plan for a terminal or a log, one fact per line."""
        launches = sum(self.launches.values())
        tokens = "/".join(str(n) for n in self.max_tokens)
        out = [
            f"arms: {', '.join(self.arms)} ({len(self.arms)} × {self.repeats} repeats = {launches} server "
            "launches, arms interleaved)",
            f"requests: {self.requests} measured + {self.warmups} warm-up ({self.per_cell} per launch, "
            f"{self._flight()}, up to {tokens} output tokens each)",
            *self._workload_lines(),
            *self._level_lines(),
            f"prompts ({sum(len(v) for v in self.prompts.values())}): "
            + "; ".join(f"{cat} {len(ids)} ({', '.join(ids)})" for cat, ids in self.prompts.items()),
        ]
        if self.forward_probe:
            out.append("forward probe: timed prefills of 1..65 tokens in each baseline launch")
        warned = [f"warning: {w}" for w in self.warnings]
        return [*out, f"estimated wall time: {self.estimate.text()} ({self.estimate.basis})", *warned]


def _workloads(requests: tuple[RequestSpec, ...], default: int) -> dict[str, tuple[int, int]]:
    counts = Counter(r.workload for r in requests if r.workload)
    if len(counts) < 2:
        return {}
    flight = {r.workload: r.concurrency or default for r in requests if r.workload}
    return {name: (n, flight[name]) for name, n in counts.items()}


def _levels(requests: tuple[RequestSpec, ...], default: int) -> list[tuple[str, int, int]]:
    """(phase, requests, in flight) per phase of a workload that sweeps: a phase other than the
    main one (a concurrency, length or rate level, a cache phase), in running order."""
    phases: dict[str, list[RequestSpec]] = {}
    for r in requests:
        phases.setdefault(r.phase, []).append(r)
    if all(p.rsplit("/", 1)[-1] == "main" for p in phases):  # several workloads: their own line
        return []
    return [(p, len(rs), rs[0].concurrency or default) for p, rs in phases.items()]


def make_plan(
    matrix: Matrix,
    cells: list[Cell],
    out: Path,
    commands: dict[str, list[str]] | None = None,
    probe: bool = True,
    forward_probe: bool = True,
    warnings: list[str] | None = None,
    room: tuple[int, float] | None = None,
) -> Plan:
    """Count ``cells`` and estimate their wall time (see the module docstring); ``probe`` False
    skips the bandwidth probe and the load sample, ``forward_probe`` False: the engine has no
    forward probe; ``room``: the load sample (:func:`~specbench.run.machineload.cpu_room`), if the
    caller took one."""
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
        forward_probe=forward_probe and matrix.forward_probe and matrix.baseline in matrix.arms,
        output_tokens=tokens,
        estimate=_cells_estimate(matrix, cells, out, probe, room),
        commands=commands or {},
        workloads=_workloads(requests, first.concurrency if first else 1),
        warnings=warnings or [],
        levels=_levels(requests, first.concurrency if first else 1),
    )


def _by_category(requests: tuple[RequestSpec, ...]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for r in requests:
        ids = groups.setdefault(r.category, [])
        if r.prompt_id not in ids:
            ids.append(r.prompt_id)
    return dict(sorted(groups.items()))


def prompt_tokens(r: RequestSpec) -> float:
    """Tokens the server prefills for ``r``, as the plan counts them (fitted length, else text)."""
    return estimated_prompt_tokens(r.messages, r.target_tokens)


def _cells_estimate(
    matrix: Matrix, cells: list[Cell], out: Path, probe: bool, room: tuple[int, float] | None = None
) -> Estimate:
    """The estimate for ``cells``; for ``repeats: auto``, the range from the verdict's minimum
    (MIN_LAUNCHES launches per arm) to every planned launch, or to ``max_minutes`` plus the round
    running then (specbench.run.adaptive starts no round after it, and lets a started one finish)."""
    room = room or _room(matrix, probe)  # one sample for every estimate below

    def rounds(n: int) -> float | None:
        part = [c for c in cells if c.repeat < n]
        tokens, prompt = _work(part)
        return estimate(matrix, len(part), tokens, out, probe, prompt, room).seconds

    tokens, prompt = _work(cells)
    full = estimate(matrix, len(cells), tokens, out, probe, prompt, room)
    if not matrix.adaptive or full.seconds is None:
        return full
    high, cap = full.seconds, f"repeats: auto: {MIN_LAUNCHES} to {matrix.repeats} launches per arm"
    if matrix.max_minutes is not None:
        cap += f", capped by max_minutes {matrix.max_minutes:g} (no round starts after it)"
        high = min(high, matrix.max_minutes * 60 + (rounds(1) or 0.0))
    else:
        cap += "; no max_minutes caps it"
    return Estimate(high, full.basis, min(rounds(MIN_LAUNCHES) or high, high), cap, full.per_token)


def _work(cells: list[Cell]) -> tuple[int, float]:
    """(output tokens at most, prompt tokens) of ``cells``, warm-ups included."""
    reqs = [r for c in cells for r in (*c.requests, *c.warmup)]
    return sum(r.max_tokens for r in reqs), sum(prompt_tokens(r) for r in reqs)


def estimate(
    matrix: Matrix,
    launches: int,
    tokens: int,
    out: Path,
    probe: bool = True,
    prompt: float = 0.0,
    room: tuple[int, float] | None = None,
) -> Estimate:
    """Wall time for ``launches`` server starts prefilling ``prompt`` tokens and generating at
    most ``tokens`` tokens, at the load ``room`` (cores, busy cores; sampled now when ``probe``
    and not given) for a CPU decode."""
    room = room or _room(matrix, probe)
    previous = previous_rate(matrix, out)
    if previous is not None:
        found = _from_run(*previous, tokens, prompt)
        return _at_load(found, matrix, room, tokens, previous[1])
    model = Path(matrix.model)
    if ENGINES[matrix.engine].model_is_file and cpu_decode(matrix) and probe and model.is_file():
        return _at_load(_from_model_size(model, launches, tokens, prompt), matrix, room, tokens)
    return Estimate(
        None,
        "no finished run of this model with these arms on this machine yet; the next plan will use this one",
    )


def cpu_decode(matrix: Matrix) -> bool:
    """The engine decodes on this machine's CPU: its speed is the machine's load as well."""
    return ENGINES[matrix.engine].decodes_on_cpu(sorted(_all_args(matrix)))


def _room(matrix: Matrix, probe: bool) -> tuple[int, float] | None:
    return cpu_room() if probe and cpu_decode(matrix) else None


def _from_run(seconds_per_token: float, run: Path, tokens: int, prompt: float) -> Estimate:
    same = f"from {run.name} (the same model, engine and arms) on this machine"
    per_prompt = prefill_rate(run)
    if per_prompt is not None:
        decode, prefill = per_prompt
        return Estimate(
            tokens * decode + prompt * prefill,
            f"{same}: {decode * 1000:.0f} ms per generated token, launches included, and "
            f"{prefill * 1000:.2f} ms per prompt token (prefill)",
        )
    return Estimate(
        tokens * seconds_per_token,
        f"{same}: {seconds_per_token * 1000:.0f} ms per generated token, launches included (prefill too)",
    )


def _at_load(
    found: Estimate, matrix: Matrix, room: tuple[int, float] | None, tokens: int, run: Path | None = None
) -> Estimate:
    """``found`` scaled by the load now against its basis's (planload.py), the assumption said in
    its basis; its ``per_token`` pace set. No sample (``room`` None): as found."""
    if found.seconds is None:
        return found
    seconds, basis = found.seconds, found.basis
    if room is not None:
        then = load_then(run) if run is not None else None
        scale = load_scale(room, engine_threads(matrix, room[0]), run.name if run else None, then)
        seconds, basis = seconds * scale.factor, f"{basis}; {scale.text}"
    return Estimate(seconds, basis, per_token=seconds / tokens if tokens > 0 else None)


def _all_args(matrix: Matrix) -> set[str]:
    return {a for arm in matrix.arms for a in matrix.arm_args(arm)}


def _from_model_size(model: Path, launches: int, tokens: int, prompt: float) -> Estimate:
    from specbench.theory.hardware import probe_cpu

    size = model.stat().st_size
    per_token_bytes, read = bytes_per_token(model)
    cpu = probe_cpu(PROBE_BYTES, reps=2)
    copy, flops = cpu.bandwidth, cpu.peak_flops * PREFILL_EFFICIENCY
    bandwidth = copy * DECODE_EFFICIENCY
    per_token, per_launch = per_token_bytes / bandwidth, LAUNCH_S + size / DISK_BYTES_S
    per_prompt = 2 * _params(model) / flops  # compute-bound: 2 FLOPs per weight per prompt token
    return Estimate(
        launches * per_launch + tokens * per_token + prompt * per_prompt,
        f"CPU decode of a {size / 1e6:.0f} MB model, {read}, at {bandwidth / 1e9:.1f} GB/s "
        f"({DECODE_EFFICIENCY * 100:.0f} % of the {copy / 1e9:.1f} GB/s copy bandwidth measured just now), "
        f"at baseline speed; prefill of ~{prompt:.0f} prompt tokens at {flops / 1e9:.0f} GFLOP/s "
        f"({PREFILL_EFFICIENCY * 100:.0f} % of the float32 matmul rate measured just now): a rough guide",
    )


def _params(model: Path) -> float:
    """Weights one prompt token multiplies: the GGUF's active parameters, else its bytes / 2."""
    from specbench.errors import ConfigError
    from specbench.theory.arch import active_params
    from specbench.theory.gguf_header import architecture_from_gguf

    try:
        return float(active_params(architecture_from_gguf(model)))
    except (ConfigError, OSError, ValueError):  # not a GGUF we can read: as if 16-bit weights
        return model.stat().st_size / 2


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


def write_plan(plan: Plan, run_dir: Path) -> Path:
    """``run_dir/plan.json``: the plan beside the measurements (rewritten on --resume)."""
    path = run_dir / "plan.json"
    write_atomic(path, json.dumps(plan.to_dict(), indent=1) + "\n")  # a full disk is exit 5
    return path


def read_plan(run_dir: Path) -> Plan:
    data = json.loads((run_dir / "plan.json").read_text())
    return Plan(**{**data, "estimate": Estimate(**data["estimate"])})
