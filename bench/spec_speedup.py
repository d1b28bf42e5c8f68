"""Side-by-side speed check (not a test: no thresholds): baseline vs draft-simple at each K on a
lab pair (default: the memory-bound dense one), interleaved in one run, printing each measured
ratio with its CI next to the theory calibrated on the baseline alone (its verify cost from the
run's forward probe) and the same cost model replayed on the measured draft counts.

    .venv/bin/python bench/spec_speedup.py [--arch dense] [--size membound] [--alpha 0.9] \
        [--k 4 8] [--repeats 3] [--out runs/bench]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import yaml

from specbench import api
from specbench.analysis import comparisons, load_run, predicted
from specbench.cli.demo import ensure_llama_server
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.lab.prompts import cycle_prompt


def matrix(folder: Path, pair: Path, binary: Path, ks: list[int], repeats: int) -> Path:
    truth = json.loads((pair / "truth.json").read_text())
    prompts = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(4)]
    prompts.append({"id": "cycle", "category": "repetitive", "prompt": cycle_prompt(truth, 48)})
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    spec = ["-md", str(pair / "draft.gguf"), "--spec-type", "draft-simple", "--spec-draft-n-max"]
    body = {
        "model": str(pair / "target.gguf"),
        "engine_binary": str(binary),
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": {"baseline": [], **{f"draft{k}": [*spec, str(k)] for k in ks}},
        "repeats": repeats,
        "workload": {"suite": "natural", "max_tokens": 48, "prompt_file": "prompts.jsonl"},
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.9)
    parser.add_argument("--arch", default="dense", choices=["dense", "moe", "hybrid"])
    parser.add_argument("--size", default="membound", choices=["tiny", "small", "membound"])
    parser.add_argument("--k", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    pair = cached_pair(LabSpec(arch=args.arch, alpha=args.alpha, size=args.size), lab_dir())
    folder = Path(tempfile.mkdtemp(prefix="specbench-bench-"))
    out = args.out or folder / "run"
    api.run_matrix(matrix(folder, pair, ensure_llama_server(None), args.k, args.repeats), out)
    for arm, cmp in comparisons(load_run(out)).items():
        print(
            f"{arm} / baseline decode tok/s: ×{cmp.ratio:.2f} "
            f"(95 % CI {cmp.ci_low:.2f}–{cmp.ci_high:.2f}), {cmp.verdict}"
        )
    print(f"run directory {out}")
    print(predicted.format_arm_predictions(predicted.run_theory(out)))


if __name__ == "__main__":
    main()
