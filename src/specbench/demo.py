"""``specbench demo``: the whole loop on the embedded default, on any machine.

Builds (or finds) llama-server, makes two lab pairs (dense α 0.8, memory-bound on a CPU; MoE α 0.9),
writes a prompt
file mixing bundled prompts with prompts that contain the target's cycle (so n-gram drafting
has known hits), runs one matrix per model — baseline, draft-simple n_max 4 and 8, ngram-mod —
prints each per-arm summary with its findings, and writes each report (``report/report.html``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from specbench import api
from specbench.analysis import load_run
from specbench.engines.install import BuildOptions, find_llama_server
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.lab.prompts import cycle_prompt
from specbench.progress import RunProgress, build_llama_server, console
from specbench.report import render_report
from specbench.summary import print_summary, stdout
from specbench.workloads.prompts import load_bundled, select

# The dense pair is big enough that CPU decode is memory-bound (verification is nearly free, so a
# draft should win); the MoE pair is small. Short prompts keep prefill out of the way on 2 cores.
DEMO_MODELS = (
    LabSpec(arch="dense", alpha=0.8, size="membound"),
    LabSpec(arch="moe", alpha=0.9, size="small"),
)
DEMO_MAX_TOKENS = 64
NGRAM_PROMPTS = 2
BUNDLED_PROMPTS = 6
SHORT_PROMPT_CHARS = 300
# ngram-mod with a short match window, so lab prompts quoting the answer draft from the start.
NGRAM_MOD_ARGS = (
    "--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "4",
    "--spec-ngram-mod-n-max", "16",
)  # fmt: skip


def ensure_llama_server(explicit: str | None) -> Path:
    found = find_llama_server(explicit, BuildOptions())
    if found is not None:
        return found
    console.print("llama-server is not built yet: building it once (15-20 minutes on 2 cores)")
    return build_llama_server(BuildOptions())


def demo_arms(draft: Path) -> dict[str, list[str]]:
    spec = ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max"]
    return {
        "baseline": [],
        "draft4": [*spec, "4"],
        "draft8": [*spec, "8"],
        "ngram-mod": list(NGRAM_MOD_ARGS),
    }


def write_prompts(path: Path, truth: dict[str, Any]) -> None:
    """Bundled prompts plus prompts quoting the target's answer, where n-gram lookup must hit."""
    short = [p for p in load_bundled() if sum(len(c) for _, c in p.messages) < SHORT_PROMPT_CHARS]
    rows = [
        {"id": p.id, "category": p.category, "messages": p.as_messages()}
        for p in select(short, BUNDLED_PROMPTS, seed=0)
    ]
    for i in range(NGRAM_PROMPTS):
        text = cycle_prompt(truth, DEMO_MAX_TOKENS, variant=i)
        rows.append({"id": f"lab-cycle-{i}", "category": "repetitive", "prompt": text})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_matrix(path: Path, pair: Path, repeats: int) -> None:
    matrix = {
        "engine": "llamacpp",
        "model": str(pair / "target.gguf"),
        "common_args": ["-c", "4096", "-np", "1"],
        "arms": demo_arms(pair / "draft.gguf"),
        "workload": {
            "suite": "natural",  # prompts as written: no padding to a target length
            "max_tokens": DEMO_MAX_TOKENS,
            "temperature": 0.0,
            "prompt_file": "prompts.jsonl",
            "prompts": BUNDLED_PROMPTS + NGRAM_PROMPTS,
        },
        "repeats": repeats,
        "warmup": 1,
    }
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))


def run_demo(out: Path, llama_server: str | None = None, repeats: int = 3) -> list[Path]:
    binary = ensure_llama_server(llama_server)
    runs = []
    for spec in DEMO_MODELS:
        pair = cached_pair(spec, lab_dir())
        name = f"{spec.arch}-a{spec.alpha:g}"
        folder = out / "matrices" / name
        folder.mkdir(parents=True, exist_ok=True)
        write_prompts(folder / "prompts.jsonl", json.loads((pair / "truth.json").read_text()))
        write_matrix(folder / "matrix.yaml", pair, repeats)
        run_dir = out / name
        resume = (run_dir / "manifest.json").exists()
        runner = api.prepare_run(folder / "matrix.yaml", run_dir, resume=resume, llama_server=str(binary))
        with RunProgress(runner.total_todo(), name) as bar:
            runner.observe = bar
            runner.run()
        print_summary(load_run(run_dir), title=f"{name}: {run_dir}")
        report = next(p for p in render_report(run_dir) if p.name == "report.html")
        stdout.print(f"report: {report}")
        runs.append(run_dir)
    return runs
