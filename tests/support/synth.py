"""SYNTHETIC run directories for report tests: no engine runs, every number below is made up.

The records are :mod:`specbench.store.schema`'s models (``RequestRecord``, ``CellInfo``, ``Manifest``)
in the shape :mod:`specbench.run.drive` and :mod:`specbench.client.stream` write — chunks
as ``Chunk`` rows without the server's running count, ``usage``, llama.cpp ``timings`` (prompt_ms,
prompt_n, draft_n, draft_n_accepted), ``t_end_ns``, ``request.max_tokens``, ``concurrency`` — and
are written through the record writer's serializer at the current schema version
(tests/support/records.py), so the report reads them exactly as it reads a real run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specbench.store.schema import SCHEMA_VERSION, CellInfo, Chunk, Manifest, RequestRecord
from specbench.theory.hardware import Gpu
from tests.support.records import write_cells, write_records

SPEC_ARGS = ("-md", "/models/draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8")
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "a",
    "speculative",
    "drafter",
    "guesses",
    "ahead",
]
SCRIPT = "<script>alert('x')</script>"


@dataclass(frozen=True)
class Arm:
    """One synthetic arm: its flags and the behaviour the records will show."""

    args: tuple[str, ...] = ()
    decode_tok_s: float = 30.0
    prefill_ms: float = 200.0
    acceptance: float = 0.7  # accepted / drafted, used only when the arm speculates
    drafts: bool = True  # False: configured to speculate, never drafts, /slots says off (silent fallback)
    drift_every: int = 0  # every n-th (prompt, repeat) output differs from the baseline; 0: never
    positions: int = 0  # > 0: cells carry vLLM-style accepted_pos_<i> counters for this many positions
    category_factor: dict[str, float] = field(default_factory=dict)
    category_acceptance: dict[str, float] = field(default_factory=dict)  # per category, else acceptance
    level_factor: dict[int, float] = field(default_factory=dict)  # decode rate × this at a concurrency level

    @property
    def speculative(self) -> bool:
        return "--spec-type" in self.args


@dataclass
class Plan:
    """What the synthetic run measured."""

    arms: dict[str, Arm]
    categories: tuple[str, ...] = ("chat", "code", "reasoning")
    prompts_per_category: int = 4
    repeats: int = 3
    lengths: tuple[int, ...] = (128,)
    levels: tuple[int, ...] = (1,)
    host: str = "box-a"
    model_sha: str = "ab" * 32
    engine_commit: str = "abc1234"
    workload: str = "single"
    noise: float = 0.03
    seed: int = 0


def _chunks(rng: np.random.Generator, arm: Arm, words: list[str], t0_ms: float, rate: float) -> list[Chunk]:
    """A role-only chunk, one chunk per token at ``rate`` tok/s from ``t0_ms``, then finish."""
    ns = 1e6
    out = [Chunk(int((t0_ms - 1) * ns), None, None, None, None)]
    for i, word in enumerate(words):
        t = t0_ms + 1000.0 * i / rate * (1 + rng.normal(0, 0.01))
        out.append(Chunk(int(t * ns), word + " ", None, None, None))
    out.append(Chunk(out[-1].t_ns + 1000, None, None, None, "length"))
    return out


def _words(prompt_id: str, n: int, differs: bool) -> list[str]:
    start = sum(map(ord, prompt_id)) % len(WORDS)
    words = [WORDS[(start + i) % len(WORDS)] for i in range(n)]
    if differs and n > 5:
        words[5] = SCRIPT
    return words


def _timings(
    arm: Arm, prefill: float, n: int, rate: float, prompt_n: int, category: str = ""
) -> dict[str, Any]:
    timings: dict[str, Any] = {
        "cache_n": 0,
        "prompt_n": prompt_n,
        "prompt_ms": prefill,
        "predicted_n": n,
        "predicted_ms": 1000.0 * (n - 1) / rate,
        "predicted_per_second": rate,
    }
    if arm.speculative:
        drafted = int(0.9 * n) if arm.drafts else 0
        accept = arm.category_acceptance.get(category, arm.acceptance)
        timings |= {"draft_n": drafted, "draft_n_accepted": round(drafted * accept)}
    return timings


Key = tuple[str, str, int, int, int]  # (prompt_id, category, repeat, max_tokens, concurrency)


def record(plan: Plan, name: str, key: Key, rng: np.random.Generator) -> RequestRecord:
    """One request of arm ``name``; key = (prompt_id, category, repeat, max_tokens, concurrency)."""
    arm = plan.arms[name]
    prompt_id, category, repeat, n, level = key
    factor = arm.category_factor.get(category, 1.0) * arm.level_factor.get(level, 1.0)
    rate = arm.decode_tok_s * factor * (1 + rng.normal(0, plan.noise))
    prefill = arm.prefill_ms * (1 + rng.normal(0, plan.noise))
    queue = 5.0 * (level - 1) * (1 + rng.random())
    index = int(prompt_id.split("@")[0].rsplit("-", 1)[1]) + repeat
    differs = bool(arm.drift_every) and index % arm.drift_every == 0
    chunks = _chunks(rng, arm, _words(prompt_id, n, differs), queue + prefill, rate)
    return RequestRecord(
        arm=name,
        repeat=repeat,
        workload=plan.workload,
        phase=f"c{level}" if len(plan.levels) > 1 else "main",  # one phase per level, as the runner
        prompt_id=prompt_id,
        category=category,
        warmup=False,
        started_at="2026-05-01T10:00:00+00:00",
        wall_start=1.77e9,
        concurrency=level,
        request={"max_tokens": n, "temperature": 0.0, "seed": 0, "ignore_eos": True},
        t_headers_ns=int(queue * 1e6),
        t_end_ns=int(chunks[-1].t_ns) + 500_000,
        chunks=chunks,
        usage={"prompt_tokens": 200, "completion_tokens": n, "total_tokens": 200 + n},
        timings=_timings(arm, prefill, n, rate, 200, category),
        model="target.gguf",
        error=None,
    )


def _prompt_id(plan: Plan, category: str, i: int, n: int, level: int) -> str:
    """Sweeps give each length / level its own prompt id, as workloads.suites does."""
    length = f"@len{n}" if len(plan.lengths) > 1 else ""
    return f"{category}-{i}{length}" + (f"@c{level}" if len(plan.levels) > 1 else "")


def _keys(plan: Plan, repeat: int) -> list[tuple[str, str, int, int, int]]:
    return [
        (_prompt_id(plan, cat, i, n, level), cat, repeat, n, level)
        for cat in plan.categories
        for i in range(plan.prompts_per_category)
        for n in plan.lengths
        for level in plan.levels
    ]


def _cell(name: str, repeat: int, arm: Arm, records: list[RequestRecord]) -> CellInfo:
    """Cell whose /metrics deltas agree with the records' timings (sources agree); with
    ``arm.positions`` position i accepts a share acceptance^(i+1) of the drafts."""
    spec = arm.speculative
    drafted = sum(r["timings"].get("draft_n", 0) for r in records)
    accepted = sum(r["timings"].get("draft_n_accepted", 0) for r in records)
    before = {"drafts": 100.0, "draft_tokens": 800.0, "accepted": 500.0}
    after = {"drafts": 100.0 + drafted / 4, "draft_tokens": 800.0 + drafted, "accepted": 500.0 + accepted}
    for i in range(arm.positions):
        after[f"accepted_pos_{i}"] = drafted / 4 * arm.acceptance ** (i + 1)
    return CellInfo(
        arm=name,
        repeat=repeat,
        attempt=0,
        server={"build_info": "b5000-abc1234", "slots_speculative": [spec and arm.drafts]},
        metrics_before={"file": f"metrics/{name}-r{repeat}-before.prom", "spec": before if spec else {}},
        metrics_after={"file": f"metrics/{name}-r{repeat}-after.prom", "spec": after if spec else {}},
        log_lines=[],
        alive_at_end=True,
    )


def _measure(plan: Plan) -> tuple[list[RequestRecord], list[CellInfo]]:
    rng = np.random.default_rng(plan.seed)
    records: list[RequestRecord] = []
    cells: list[CellInfo] = []
    for repeat in range(plan.repeats):
        order = list(plan.arms) if repeat % 2 == 0 else list(plan.arms)[::-1]
        for name in order:
            warm = record(plan, name, ("warm-0", "chat", repeat, 16, 1), rng) | {"warmup": True}
            # A sweep runs level by level (a phase each), as the runner does.
            keys = sorted(_keys(plan, repeat), key=lambda k: plan.levels.index(k[4]))
            cell = [record(plan, name, key, rng) for key in keys]
            records += [warm, *cell]
            cells.append(_cell(name, repeat, plan.arms[name], cell))
    failed = record(plan, next(iter(plan.arms)), ("chat-0", "chat", 0, 16, 1), rng)
    records.append(failed | {"error": {"type": "ReadTimeout", "message": "timed out"}, "chunks": []})
    for seq, rec in enumerate(records, 1):
        rec["seq"] = seq
    return records, cells


def _manifest(plan: Plan) -> Manifest:
    common = ["-c", "4096", "-np", "1"]
    matrix = {
        "engine": "llamacpp",
        "model": "/models/target.gguf",
        "common_args": common,
        "arms": {name: list(arm.args) for name, arm in plan.arms.items()},
        "baseline": next(iter(plan.arms)),
        "workload": {"suite": plan.workload, "max_tokens": plan.lengths[0], "temperature": 0.0},
        "repeats": plan.repeats,
        "warmup": 1,
    }
    command = ["/opt/llama/bin/llama-server", "-m", "/models/target.gguf", *common]
    return Manifest(
        schema_version=SCHEMA_VERSION,
        specbench_version="0.1.0",
        host=plan.host,
        started_at="2026-05-01T10:00:00+00:00",
        finished_at="2026-05-01T10:30:00+00:00",
        matrix=matrix,
        arms={
            name: {"status": "ok", "command": [*command, *arm.args, "--port", "8080", "--metrics"]}
            for name, arm in plan.arms.items()
        },
    )


def _env(plan: Plan) -> dict[str, Any]:
    return {
        "platform": "Linux-6.8.0-x86_64-with-glibc2.39",
        "python": "3.11.9",
        "cpu": "AMD EPYC 7B13",
        "cpu_count_logical": 16,
        "cpu_count_physical": 8,
        "ram_bytes": 64 * 2**30,
        "gpus": [
            {"name": "NVIDIA RTX 3090", "driver_version": "550.54", "memory.total": "24576 MiB"}
            | {"cuda": "12.4"}
        ],
        "specbench_version": "0.1.0",
        "engine": {
            "kind": "llamacpp",
            "binary": "/opt/llama/bin/llama-server",
            "build": {"llama_cpp_commit": plan.engine_commit, "cuda": True, "cmake_args": ["-DGGML_CUDA=ON"]},
            "version": "5000",
            "build_number": 5000,
            "commit": plan.engine_commit,
        },
        "model": {"path": "/models/target.gguf", "sha256": plan.model_sha, "bytes": 123_456_789},
    }


def make_run(root: Path, plan: Plan) -> Path:
    """Write manifest.json, env.json, records.jsonl and cells.jsonl for ``plan`` under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    records, cells = _measure(plan)
    (root / "manifest.json").write_text(json.dumps(_manifest(plan), indent=1))
    (root / "env.json").write_text(json.dumps(_env(plan), indent=1))
    write_records(root / "records.jsonl", records)
    write_cells(root / "cells.jsonl", cells)
    return root


def spec(rate: float, prefill_ms: float = 200.0, **kw: Any) -> Arm:
    """A draft-model arm."""
    return Arm(args=SPEC_ARGS, decode_tok_s=rate, prefill_ms=prefill_ms, **kw)


def arms(**named: Arm) -> dict[str, Arm]:
    """Arms in order, the first being the baseline."""
    return dict(named)


# -- lab models (theory: predicted vs measured) ---------------------------------------------------
def lab_truth(
    size: str = "membound", arch: str = "dense", alpha: float = 0.8, vocab: int = 866
) -> dict[str, Any]:
    """The shape part of a truth.json as ``specbench lab make`` writes it (no model files)."""
    from specbench.lab.acceptance import designed_acceptance
    from specbench.lab.gguf_model import weight_bytes
    from specbench.lab.make import PRESETS

    target, draft = PRESETS[size][arch], PRESETS[size]["draft"]
    return {
        "alpha": alpha,
        "vocab_size": vocab,
        "target": {**target.as_dict(), **weight_bytes(target, vocab)},
        "draft": {**draft.as_dict(), **weight_bytes(draft, vocab)},
        "designed_acceptance": {str(k): designed_acceptance(alpha, k) for k in (1, 2, 4, 8, 16)},
    }


def use_lab_model(run: Path, truth: dict[str, Any], gpu: str | None = None) -> Path:
    """Point ``run`` at a lab pair in ``run/lab`` (truth.json only): the matrix model becomes
    ``lab/target.gguf``, every ``-md`` ``lab/draft.gguf``; ``gpu`` None makes it a CPU run."""
    lab = run / "lab"
    lab.mkdir(exist_ok=True)
    (lab / "truth.json").write_text(json.dumps(truth))
    manifest = json.loads((run / "manifest.json").read_text())
    matrix = manifest["matrix"]
    matrix["model"] = str(lab / "target.gguf")
    for name, argv in matrix["arms"].items():
        matrix["arms"][name] = [str(lab / "draft.gguf") if a == SPEC_ARGS[1] else a for a in argv]
    (run / "manifest.json").write_text(json.dumps(manifest, indent=1))
    env = json.loads((run / "env.json").read_text())
    env["gpus"] = [{"name": gpu}] if gpu else []
    env["engine"]["build"]["cuda"] = gpu is not None
    (run / "env.json").write_text(json.dumps(env, indent=1))
    return run


# -- shapes the report tests share --------------------------------------------------------------
CJK_CATEGORY = "中文写作"
FAKE_CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=1.0, memory_gb=32.0, unified=True, host_link_gbs=20.0)


def two_machines(root: Path, second_sha: str = "ab" * 32, second_commit: str = "abc1234") -> list[Path]:
    arms = {"baseline": Arm(decode_tok_s=30), "fast": spec(45)}
    slower = {"baseline": Arm(decode_tok_s=30), "fast": spec(36)}
    a = make_run(root / "a", Plan(arms=arms, host="box-a", repeats=3))
    b = make_run(
        root / "b",
        Plan(arms=slower, host="box-b", model_sha=second_sha, engine_commit=second_commit, seed=1, repeats=3),
    )
    return [a, b]
