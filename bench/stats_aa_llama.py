"""A/A calibration on the real llama-server (prints figures; asserts nothing): run the same
lab target as two arms ("baseline" and "same") in N independent experiments and count how often
the verdict is falsely faster or slower (goal: ≤ 5 %), in a fixed design and with ``repeats: auto``.

    flock /tmp/specbench-engine.lock .venv/bin/python bench/stats_aa_llama.py --experiments 20
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from specbench import api
from specbench.analysis import comparisons, load_run
from specbench.cli.demo import ensure_llama_server
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair

PROMPTS = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(5)]


def experiment(
    folder: Path, pair: Path, binary: Path, repeats: int | str, max_repeats: int
) -> tuple[str, int]:
    """(verdict of "same" vs "baseline", launch pairs used) for one A/A run."""
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    body: dict[str, object] = {
        "model": str(pair / "target.gguf"),
        "engine_binary": str(binary),
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": {"baseline": [], "same": []},
        "repeats": repeats,
        "max_repeats": max_repeats,
        "forward_probe": False,
        "workload": {"suite": "natural", "max_tokens": 32, "prompt_file": "prompts.jsonl"},
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(body))
    api.run_matrix(folder / "matrix.yaml", folder / "run")
    data = load_run(folder / "run")
    cmp = comparisons(data)["same"]
    return cmp.verdict, cmp.n_launches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiments", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3, help="launches per arm in the fixed design")
    ap.add_argument("--max-repeats", type=int, default=6, help="budget of the adaptive design")
    args = ap.parse_args()
    binary = ensure_llama_server(None)
    pair = cached_pair(LabSpec(arch="dense", alpha=0.8), lab_dir())
    started = time.monotonic()
    for design, repeats in (("fixed", args.repeats), ("adaptive", "auto")):
        seen: Counter[str] = Counter()
        launches = 0
        for _ in range(args.experiments):
            with tempfile.TemporaryDirectory() as tmp:
                verdict, n = experiment(Path(tmp), pair, binary, repeats, args.max_repeats)
            seen[verdict] += 1
            launches += n
        false = (seen["faster"] + seen["slower"]) / args.experiments
        print(
            f"A/A {design:<8} {args.experiments} experiments: false faster/slower {false:.0%} "
            f"({dict(seen)}), mean launches {launches / args.experiments:.1f}",
            flush=True,
        )
    print(f"({(time.monotonic() - started) / 60:.1f} min)")


if __name__ == "__main__":
    main()
