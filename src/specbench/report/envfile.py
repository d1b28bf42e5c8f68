"""BENCHMARK_ENV.md: everything a reader needs to reproduce (or doubt) the numbers.

Hardware, OS, driver / CUDA, engine version, commit and build options, model path and SHA-256,
and the exact command line every arm was served with — read from env.json and manifest.json
(and, after a merge, ``envs/<machine>.json`` for each machine), never from the current machine.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from specbench import __version__
from specbench.report.page.document import Block, Code, Heading, Para, Table
from specbench.store.rundir import RunStore

GIB = 2**30
MISSING_ENV = (
    "Unknown: env.json is missing from the run directory, so the hardware, OS, engine build and "
    "model checksum of this run cannot be stated. Every run writes it at its start; a run directory "
    "without it was damaged or assembled by hand."
)


def _kv(pairs: list[tuple[str, Any]]) -> Table:
    # unknown, not "—": a reader must not take a missing record for an empty value
    rows = [{"item": k, "value": "unknown" if v in (None, "", [], {}) else str(v)} for k, v in pairs]
    return Table(pd.DataFrame(rows, columns=["item", "value"]))


def _gpus(env: dict[str, Any]) -> str | None:
    if "gpus" not in env:  # never recorded: "none detected" would claim a CPU-only machine
        return None
    gpus = env.get("gpus") or []
    if not gpus:
        return "none detected"
    return "; ".join(
        f"{g.get('name', '?')} ({g.get('memory.total', '?')}, driver {g.get('driver_version', '?')}, "
        f"CUDA {g.get('cuda') or '?'})"
        for g in gpus
    )


def _pair(a: Any, b: Any) -> str | None:
    return (
        None if a is None and b is None else f"{a if a is not None else '?'} / {b if b is not None else '?'}"
    )


def machine_blocks(env: dict[str, Any], level: int = 2) -> list[Block]:
    ram = env.get("ram_bytes")
    engine, model = env.get("engine") or {}, env.get("model") or {}
    build = engine.get("build") or {}
    machine = _kv([
        ("CPU", env.get("cpu")),
        ("cores (physical / logical)", _pair(env.get("cpu_count_physical"), env.get("cpu_count_logical"))),
        ("RAM", f"{ram / GIB:.1f} GiB" if isinstance(ram, int | float) else None),
        ("GPU, driver, CUDA", _gpus(env)),
        ("OS", env.get("platform")),
        ("Python", env.get("python")),
        ("specbench (at measurement)", env.get("specbench_version")),
        ("captured at", env.get("captured_at")),
    ])  # fmt: skip
    eng = _kv([
        ("engine", engine.get("kind")),
        ("version", engine.get("version")),
        ("build number", engine.get("build_number")),
        ("commit", engine.get("commit")),
        ("binary", engine.get("binary")),
        ("build options", json.dumps(build, sort_keys=True) if build else "not recorded (user's own build)"),
    ])  # fmt: skip
    mod = _kv([("path", model.get("path")), ("SHA-256", model.get("sha256")), ("bytes", model.get("bytes"))])
    h = level + 1
    blocks: list[Block] = [Heading("Hardware and OS", h), machine, Heading("Engine", h), eng]
    blocks += [Heading("Model", h), mod]
    files = [(arm, f) for arm, fs in (env.get("arm_files") or {}).items() for f in fs]
    if files:
        rows = [{"arm": a, "flag": f.get("flag"), "path": f.get("path"), "SHA-256": f.get("sha256"),
                 "bytes": f.get("bytes")} for a, f in files]  # fmt: skip
        blocks += [Heading("Files the arms use", h), Table(pd.DataFrame(rows))]
    return blocks


def command_blocks(arms: dict[str, Any], level: int = 2) -> list[Block]:
    out: list[Block] = []
    for arm, info in arms.items():
        cmd = (info or {}).get("command")
        # The environment the engine was given goes in front, so the line pastes into a shell as is.
        env = [f"{k}={v}" for k, v in sorted(((info or {}).get("env") or {}).items())]
        out.append(Heading(f"{arm} ({(info or {}).get('status', 'not run')})", level + 1))
        out.append(
            Code(shlex.join([*env, *map(str, cmd)]))
            if cmd
            else Para("not recorded: the arm was never launched.")
        )
    return out


def _matrix_blocks(manifest: dict[str, Any]) -> list[Block]:
    matrix = manifest.get("matrix") or {}
    named = described_workloads(matrix)
    return [
        Heading("Matrix", 2),
        _kv([
            ("run started / finished", f"{manifest.get('started_at')} / {manifest.get('finished_at')}"),
            ("specbench (at measurement)", manifest.get("specbench_version")),
            ("specbench (this report)", __version__),
            ("engine", matrix.get("engine")),
            ("baseline", matrix.get("baseline")),
            ("common args", shlex.join(map(str, matrix.get("common_args") or []))),
            *((f"workload {name}" if len(named) > 1 else "workload", text) for name, text in named),
            ("repeats / warm-up", f"{matrix.get('repeats')} / {matrix.get('warmup')}"),
            *_merge_rows(manifest),
        ]),
    ]  # fmt: skip


def _listed(values: Any) -> str:
    return ", ".join(str(v) for v in values)


# Matrix workload field → how the report says it (None: the field is left out when unset).
_WORDS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("prompts", lambda v: f"{v} prompts"),
    ("categories", lambda v: f"categories {_listed(v)}"),
    ("prompt_file", lambda v: f"prompts from {v}"),
    ("max_tokens", lambda v: f"up to {v} output tokens"),
    ("lengths", lambda v: f"output lengths {_listed(v)} tokens"),
    ("levels", lambda v: f"{_listed(v)} requests in flight"),
    ("rates", lambda v: f"open loop at {_listed(v)} requests/s"),
    ("input_tokens", lambda v: f"prompts of about {v} tokens"),
    ("temperature", lambda v: f"temperature {v:g}" if isinstance(v, int | float) else f"temperature {v}"),
    ("scale", lambda v: f"lengths scaled ×{v:g}" if v != 1 else ""),
    (
        "ignore_eos",
        lambda v: "every answer runs to its length (ignore_eos)" if v else "answers may stop early",
    ),
    ("extra_body", lambda v: f"request extras {json.dumps(v, sort_keys=True)}" if v else ""),
)


def describe_workload(workload: dict[str, Any]) -> str:
    """The matrix's workload in words, e.g. "suite natural: 8 prompts, up to 200 output tokens,
    temperature 0"; fields the matrix left unset (the suite's defaults) are not mentioned."""
    parts = [say(workload[key]) for key, say in _WORDS if workload.get(key) is not None]
    known = {key for key, _ in _WORDS} | {"suite", "name"}
    parts += [f"{key} {value}" for key, value in sorted(workload.items()) if key not in known]
    detail = ", ".join(p for p in parts if p)
    return f"suite {workload.get('suite', 'single')}" + (f": {detail}" if detail else "")


def described_workloads(matrix: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, words) of each workload a matrix names: its ``workloads`` list, or its ``workload``."""
    listed = matrix.get("workloads") or [matrix.get("workload") or {}]
    return [(str(w.get("name") or w.get("suite") or "single"), describe_workload(w)) for w in listed]


def _merge_rows(manifest: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where a merged run's records came from, and what was pooled despite differing."""
    sources = manifest.get("sources") or []
    if not sources:
        return []
    names = ", ".join(f"{s.get('machine')} ← {s.get('path')} ({s.get('started_at')})" for s in sources)
    return [("merged from", names), ("pooled despite", "; ".join(manifest.get("pooled_despite") or []))]


def merged_envs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Machine → env.json of each source of a merged run (empty for a plain run)."""
    folder = run_dir / "envs"
    return (
        {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
    )


def env_blocks(run_dir: Path, manifest: dict[str, Any]) -> list[Block]:
    """The environment document: one machine, or one section per machine of a merged run."""
    blocks: list[Block] = [Heading("Benchmark environment", 1), Para(f"Run directory: {run_dir.name}")]
    blocks += _matrix_blocks(manifest)
    envs = merged_envs(run_dir)
    if not envs:
        env = RunStore(run_dir).env()  # a damaged env.json: one line naming it, not a traceback
        blocks += [Heading("Machine", 2)]
        blocks += machine_blocks(env) if env else [Para(MISSING_ENV)]
        return [*blocks, Heading("Command line of every arm", 2), *command_blocks(manifest.get("arms") or {})]
    sources = {s.get("machine"): s for s in manifest.get("sources") or []}
    for machine, env in envs.items():
        blocks += [Heading(f"Machine {machine}", 2), *machine_blocks(env)]
        blocks += [
            Heading("Command line of every arm", 3),
            *command_blocks(sources.get(machine, {}).get("arms", {}), 3),
        ]
    return blocks
