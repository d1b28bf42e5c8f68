"""The run step of the GPU check (issue 34): lab pairs, one small matrix per pair, the calibrated
prediction of each run, and one summary for the output folder.

    python bench/gpu_run.py OUTDIR [--kit gpu-kit] [--cpu]

On the device it uses the CUDA llama-server that ``bench/gpu_kit.py build`` left in
``gpu-kit/work/bin``; with ``--cpu`` (the rehearsal) the cached CPU build and tiny lab models with
fewer tokens. Resumable: made pairs are kept, and a run cut short by the time budget continues with
``specbench run --resume`` on the next call. The device returns at most 8 files from ``$OUT``, so
the run folders travel back as one ``reports.tar.gz`` beside ``summary.md`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_kit  # a sibling script, not a package: found through the sys.path line above

MAX_REPORT_FILE = 2 * 1024**2  # per file in reports.tar.gz: the tool returns 16 MiB per file


@dataclass(frozen=True)
class Plan:
    """What the run step measures: the lab pairs and the matrix shape, GPU-sized or rehearsal-sized."""

    size: str
    max_tokens: int
    bundled_prompts: int
    cycle_prompts: int
    max_repeats: int
    common_args: tuple[str, ...]
    # or "cliff": the dense pair only, ngram-mod at n_max 8, 15 and 16; or "concurrency": the
    # dense pair's baseline, draft4 and ngram-mod at each of ``levels`` in flight (issue 40)
    arms: str = "demo"
    levels: tuple[int, ...] = (1, 8, 64)

    @property
    def pairs(self) -> tuple[tuple[str, float], ...]:
        return (("dense", 0.8),) if self.arms in ("cliff", "concurrency") else (("dense", 0.8), ("moe", 0.9))


# GPU: the lab's gpu preset (a 5.1 GB dense f16 target, memory-bound on an H100/H200; its MoE pair
# is membound's size), 128-token answers, up to 4 launches per arm (docs/gpu.md). The first lease
# ran GPU_LAB_SIZE=membound (471 MB: launch-bound there).
GPU_PLAN = Plan(
    size=os.environ.get("GPU_LAB_SIZE", "gpu"), max_tokens=128, bundled_prompts=4,
    cycle_prompts=2, max_repeats=4, common_args=("-c", "4096", "-np", "1", "-ngl", "99"),
    arms=os.environ.get("GPU_CHECK_ARMS", "demo"),
)  # fmt: skip
# The rehearsal: same arms and flags on tiny models, short answers, the fewest launches auto allows.
CPU_PLAN = Plan(
    size="tiny", max_tokens=24, bundled_prompts=2, cycle_prompts=1, max_repeats=3,
    common_args=("-c", "1024", "-np", "1", "-ngl", "99", "-t", "2"),
    arms=os.environ.get("GPU_CHECK_ARMS", "demo"), levels=(1, 4),
)  # fmt: skip


def specbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "specbench.cli", *args]


def child_env(kit: Path) -> dict[str, str]:
    """specbench from this working tree (plus the carried wheels on the device), its lab cache
    inside the kit so made pairs survive between the two device calls."""
    paths = [str(gpu_kit.REPO / "src"), str(kit / "work" / "site"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}
    env.setdefault("SPECBENCH_CACHE", str(kit / "work" / "cache"))
    libs = gpu_kit.Steps(kit / "work", 0).state.get("ld_library_path")
    if libs:  # cuBLAS from PyTorch's wheel (gpu_kit.cublas_hints): llama-server loads it at start
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libs, env.get("LD_LIBRARY_PATH", "")) if p)
    env.setdefault("COLUMNS", "120")
    return env


def llama_server(kit: Path, cpu: bool) -> Path:
    if not cpu:
        return kit / "work" / "bin" / "llama-server"
    from specbench.engines.install import BuildOptions, find_llama_server

    found = find_llama_server(None, BuildOptions())
    if found is None:
        raise SystemExit("no cached llama-server: run `specbench engine install llamacpp` first")
    return found


def write_matrix(folder: Path, pair: Path, plan: Plan) -> Path:
    """Baseline, the draft model at K 4 and 8, ngram-mod: the demo's arms, on this plan's sizes."""

    from specbench.lab.prompts import cycle_prompt
    from specbench.workloads.prompts import load_bundled, select

    truth = json.loads((pair / "truth.json").read_text())
    short = [p for p in load_bundled() if sum(len(c) for _, c in p.messages) < 300]
    rows: list[dict[str, Any]] = [
        {"id": p.id, "category": p.category, "messages": p.as_messages()}
        for p in select(short, plan.bundled_prompts, seed=0)
    ]
    for i in range(plan.cycle_prompts):
        text = cycle_prompt(truth, plan.max_tokens, variant=i)
        rows.append({"id": f"lab-cycle-{i}", "category": "repetitive", "prompt": text})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if plan.arms == "concurrency":
        return _write(folder, concurrency_matrix(pair, plan, len(rows)))
    matrix = {
        "engine": "llamacpp",
        "model": str(pair / "target.gguf"),
        "common_args": list(plan.common_args),
        "arms": cliff_arms() if plan.arms == "cliff" else gpu_arms(pair / "draft.gguf"),
        "workload": {
            "suite": "natural",
            "max_tokens": plan.max_tokens,
            "temperature": 0.0,
            "prompt_file": "prompts.jsonl",
            "prompts": len(rows),
        },
        "repeats": "auto",
        "max_repeats": plan.max_repeats,
        "warmup": 1,
    }
    return _write(folder, matrix)


def _write(folder: Path, matrix: dict[str, Any]) -> Path:
    import yaml

    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    return path


def concurrency_matrix(pair: Path, plan: Plan, prompts: int) -> dict[str, Any]:
    """The concurrency plan (issue 40): baseline, draft4 and ngram-mod at each level in flight, one
    slot per request of the highest level, three launches per arm (a verdict needs three launch
    pairs at every level; the answer is per level, by throughput with a TTFT p99 guard)."""
    slots = max(plan.levels)
    common = [a for a in plan.common_args]
    common[common.index("-np") + 1] = str(slots)
    common[common.index("-c") + 1] = str(slots * 1024)
    arms = gpu_arms(pair / "draft.gguf")
    return {
        "engine": "llamacpp",
        "model": str(pair / "target.gguf"),
        "common_args": common,
        "arms": {name: arms[name] for name in ("baseline", "draft4", "ngram-mod")},
        "workload": {
            "suite": "concurrency-sweep",
            "levels": list(plan.levels),
            "max_tokens": plan.max_tokens // 2,
            "temperature": 0.0,
            "prompt_file": "prompts.jsonl",
            "prompts": prompts,
        },
        "repeats": 3,
        "warmup": 1,
    }


def gpu_arms(draft: Path) -> dict[str, list[str]]:
    """The demo's arms; the draft model's layers on the GPU too (``-ngld``: its default, auto, fits
    them, but a draft left on the CPU would make every draft arm a measurement of the CPU)."""
    from specbench.cli.demo import demo_arms

    arms = demo_arms(draft)
    return {name: [*args, "-ngld", "99"] if "-md" in args else args for name, args in arms.items()}


def cliff_arms() -> dict[str, list[str]]:
    """The verify-cost step of the first H200 lease (docs/gpu.md): a batch of 13 tokens cost 1.4
    decode steps, 17 cost 3.9. ngram-mod drafts n_max tokens a round when the lab's answer repeats,
    so n_max 15 and 16 verify 16 and 17 tokens: on either side of a step at 16, if it is there."""
    base = ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "4"]
    return {"baseline": []} | {f"ngram{n}": [*base, "--spec-ngram-mod-n-max", str(n)] for n in (8, 15, 16)}


def make_pair(
    arch: str, alpha: float, plan: Plan, work: Path, steps: gpu_kit.Steps, log: Path
) -> Path | None:
    out = work / "lab" / f"{arch}-a{alpha:g}-{plan.size}"
    if (out / "truth.json").is_file():
        return out
    start = time.monotonic()
    args = ["lab", "make", "--out", str(out), "--arch", arch, "--alpha", str(alpha), "--size", plan.size]
    code = gpu_kit.run_logged(specbench(*args), log, steps.left(), child_env(work.parent))
    size = sum(p.stat().st_size for p in out.glob("*.gguf")) if out.is_dir() else 0
    steps.record(f"lab make {out.name}", time.monotonic() - start, code == 0, f"{size / 1024**2:.0f} MiB")
    return out if code == 0 else None


def run_pair(
    name: str, pair: Path, plan: Plan, binary: Path, work: Path, steps: gpu_kit.Steps, log: Path
) -> Path:
    run_dir = work / "runs" / name
    if (run_dir / "summary.csv").is_file() and steps.state.get("done", {}).get(name):
        return run_dir
    matrix = write_matrix(work / "matrices" / name, pair, plan)
    args = ["run", str(matrix), "--out", str(run_dir), "--llama-server", str(binary)]
    args += ["--resume"] if (run_dir / "manifest.json").is_file() else []
    start = time.monotonic()
    code = gpu_kit.run_logged(specbench(*args), log, steps.left() - 15, child_env(work.parent))
    # 6: the run finished but an arm failed; that is a result to report, not a reason to stop
    finished = code in (0, 6)
    steps.state.setdefault("done", {})[name] = finished
    steps.record(f"run {name}", time.monotonic() - start, finished, f"exit {code}" if code else "")
    return run_dir


def calibrate(run_dir: Path, work: Path, steps: gpu_kit.Steps, log: Path) -> dict[str, Any]:
    start = time.monotonic()
    out = run_dir / "predict.json"
    with out.open("w") as sink:
        import subprocess

        args = specbench("predict", "--calibrate", str(run_dir), "--format", "json")
        done = subprocess.run(
            args, stdout=sink, stderr=subprocess.PIPE, text=True, env=child_env(work.parent)
        )
    note = done.stderr.strip().splitlines()[-1] if done.returncode else ""
    with log.open("a") as sink:
        sink.write(f"\n$ predict --calibrate {run_dir}\n{done.stderr}")
    steps.record(f"predict --calibrate {run_dir.name}", time.monotonic() - start, done.returncode == 0, note)
    return json.loads(out.read_text()) if done.returncode == 0 else {"error": note}


def arm_table(run_dir: Path) -> list[dict[str, str]]:
    """report/summary.csv's rows: each arm's decode speed, speedup with its interval, acceptance, verdict."""
    path = run_dir / "report" / "summary.csv"
    keep = ["workload", "arm", "decode_tok_s_median", "speedup", "speedup_ci_low", "speedup_ci_high"]
    keep += ["acceptance", "verdict"]
    rows = csv.DictReader(io.StringIO(path.read_text())) if path.is_file() else []
    return [{k: row.get(k, "") for k in keep} for row in rows]


def decisions(run_dir: Path) -> list[dict[str, Any]]:
    """The report's decision per workload (findings.json ``decisions``): ship which arm, or why not."""
    path = run_dir / "report" / "findings.json"
    return list(json.loads(path.read_text()).get("decisions", [])) if path.is_file() else []


def pack_reports(work: Path, out: Path) -> None:
    """The run folders (files up to 2 MiB each) as one tarball; only their report/ folders if
    that would pass the 16 MiB the device tool returns per file."""
    target = out / "reports.tar.gz"
    for only_reports in (False, True):
        with tarfile.open(target, "w:gz") as tar:
            for folder in ("runs", "matrices"):
                for path in sorted((work / folder).rglob("*")):
                    small = path.is_file() and path.stat().st_size <= MAX_REPORT_FILE
                    if small and (not only_reports or "report" in path.relative_to(work).parts):
                        tar.add(path, arcname=str(path.relative_to(work)))
        if target.stat().st_size < 15 * 1024**2:
            return


def run(kit: Path, out: Path, cpu: bool, budget_s: float) -> int:
    plan, work, log = (CPU_PLAN if cpu else GPU_PLAN), kit / "work", out / "run.log"
    steps = gpu_kit.Steps(work, budget_s)
    out.mkdir(parents=True, exist_ok=True)
    steps.state["plan"] = {**plan.__dict__, "mode": "cpu rehearsal" if cpu else "gpu"}
    binary = llama_server(kit, cpu)
    if not binary.is_file():
        raise SystemExit(f"{binary} is missing: run `bench/gpu_check.sh build OUTDIR` first")
    results: dict[str, Any] = {}
    for arch, alpha in plan.pairs:
        name = f"{arch}-a{alpha:g}"
        if steps.left() < 30:  # leave time for the summary; the next `run` call resumes here
            steps.record(f"run {name}", 0.0, False, "out of time: call `run` again to resume")
            continue
        pair = make_pair(arch, alpha, plan, work, steps, log)
        if pair is None:
            continue
        run_dir = run_pair(name, pair, plan, binary, work, steps, log)
        predicted = calibrate(run_dir, work, steps, log) if steps.state["done"].get(name) else {}
        results[name] = {"decisions": decisions(run_dir), "arms": arm_table(run_dir), "predict": predicted}
    steps.state["results"] = results
    steps.save()
    pack_reports(work, out)
    write_summary(out, steps.state, str(binary))
    done = steps.state.get("done", {})
    return 0 if len(done) == len(plan.pairs) and all(done.values()) else 75


def write_summary(out: Path, state: dict[str, Any], binary: str) -> None:
    (out / "summary.json").write_text(json.dumps({**state, "llama_server": binary}, indent=1))
    lines = ["# GPU check summary", "", f"- llama-server: `{binary}`"]
    lines += [
        f"- GPU: {json.dumps(state.get('gpu') or 'none (CPU rehearsal)')}",
        f"- plan: {state.get('plan')}",
    ]
    lines += ["", "| step | seconds | ok | note |", "| --- | --- | --- | --- |"]
    lines += [f"| {s['step']} | {s['seconds']} | {s['ok']} | {s['note']} |" for s in state["steps"]]
    for name, result in state.get("results", {}).items():
        lines += ["", f"## {name}", ""]
        lines += [
            f"- decision: {d.get('recommendation')} ({d.get('reason') or d.get('arm')})"
            for d in result["decisions"]
        ]
        lines += ["", "| arm | decode tok/s | speedup [CI] | acceptance | predicted | verdict |"]
        lines += ["| --- | --- | --- | --- | --- | --- |"]
        predicted = {a["arm"]: a for a in result["predict"].get("arms", [])}
        lines += [_arm_line(row, predicted.get(row["arm"], {})) for row in result["arms"]]
        if "error" in result["predict"]:
            lines += ["", f"predict --calibrate: {result['predict']['error']}"]
        elif "calibration" in result["predict"]:
            lines += ["", f"calibration: {result['predict']['calibration']}"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def _arm_line(row: dict[str, str], predicted: dict[str, Any]) -> str:
    def num(value: Any) -> str:
        return f"{float(value):.2f}" if value not in ("", None) else "-"

    speedup = f"{num(row['speedup'])} [{num(row['speedup_ci_low'])}, {num(row['speedup_ci_high'])}]"
    guess = num(predicted.get("predicted_speedup"))
    cells = [
        row["arm"],
        num(row["decode_tok_s_median"]),
        speedup,
        num(row["acceptance"]),
        guess,
        row["verdict"],
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kit", type=Path, default=gpu_kit.REPO / "gpu-kit")
    parser.add_argument("--cpu", action="store_true", help="rehearsal: cached CPU build, tiny models")
    parser.add_argument("--budget", type=float, default=float(os.environ.get("GPU_CHECK_BUDGET_S", 555)))
    args = parser.parse_args(argv)
    kit = args.kit.resolve()
    sys.path[:0] = [str(kit / "work" / "site"), str(gpu_kit.REPO / "src")]
    return run(kit, args.out.resolve(), args.cpu, args.budget)


if __name__ == "__main__":
    sys.exit(main())
