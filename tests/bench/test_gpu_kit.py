"""The GPU check kit (bench/gpu_kit.py, bench/gpu_run.py, bench/gpu_check.sh; docs/gpu.md).

The trimming rules are checked on a fake tree; the CPU rehearsal drives the real scripts end to
end (trimmed tarball, configure, lab pairs, matrices, predict --calibrate, summary) with the
cached CPU llama-server, so the GPU machine's minutes go to the real run only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.paths import BENCH

sys.path.insert(0, str(BENCH))
import gpu_kit

KEPT = [
    "CMakeLists.txt",
    "src/llama.cpp",
    "src/models/llama.cpp",  # not the top-level models/
    "tools/mtmd/models/cogvlm.cpp",
    "tools/server/server.cpp",
    "tools/ui/CMakeLists.txt",
    "ggml/src/ggml-cuda/fattn.cu",
    "ggml/src/ggml-cpu/ops.cpp",
    "vendor/miniaudio/miniaudio.h",
    "scripts/ui-assets.cmake",
]
DROPPED = [
    "models/ggml-vocab-llama-spm.gguf",
    "docs/build.md",
    "tests/test-backend-ops.cpp",
    "examples/simple/simple.cpp",
    ".github/workflows/build.yml",
    "convert_hf_to_gguf.py",
    "ggml/src/ggml-vulkan/ggml-vulkan.cpp",
    "ggml/src/ggml-metal/ggml-metal.m",
    "ggml/src/ggml-hip/CMakeLists.txt",
    "tools/ui/tests/unit/a.ts",
]


@pytest.mark.parametrize("rel", KEPT)
def test_keep_keeps_what_a_cuda_server_build_reads(rel: str) -> None:
    assert gpu_kit.keep(rel)


@pytest.mark.parametrize("rel", DROPPED)
def test_keep_drops_docs_tests_models_and_other_backends(rel: str) -> None:
    assert not gpu_kit.keep(rel)


def test_tarball_holds_exactly_the_kept_files(tmp_path: Path) -> None:
    root = tmp_path / "llama.cpp"
    for rel in KEPT + DROPPED:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    size = gpu_kit.write_tarball(root, tmp_path / "kit" / "src.tar.gz")
    with tarfile.open(tmp_path / "kit" / "src.tar.gz") as tar:
        names = sorted(m.name for m in tar.getmembers())
    assert names == sorted(f"llama.cpp/{rel}" for rel in KEPT)
    assert size == (tmp_path / "kit" / "src.tar.gz").stat().st_size


def test_cuda_cmake_args_add_one_architecture_to_specbench_own_options() -> None:
    args = gpu_kit.cmake_args("90")
    assert "-DGGML_CUDA=ON" in args and "-DCMAKE_CUDA_ARCHITECTURES=90" in args
    assert "-DLLAMA_BUILD_TESTS=OFF" in args  # specbench's BuildOptions, unchanged
    assert "-DGGML_CUDA=ON" not in gpu_kit.cmake_args("")


def _script(verb: str, out: Path, kit: Path, server: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPU_CHECK_CPU": "1", "GPU_KIT": str(kit), "PYTHON": sys.executable}
    env["SPECBENCH_LLAMA_SERVER"] = str(server)
    cmd = ["bash", str(BENCH / "gpu_check.sh"), verb, str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400, check=False)


@pytest.mark.engine
def test_cpu_rehearsal_writes_summary_reports_and_decisions(tmp_path: Path, llama_server: Path) -> None:
    kit, out = tmp_path / "kit", tmp_path / "out"
    gpu_kit.prepare(kit, wheels=False)  # the pinned source, trimmed: the tarball the device builds
    built = _script("build", out, kit, llama_server)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (kit / "work" / "build" / "build.ninja").is_file()  # the trimmed tree configures
    ran = _script("run", out, kit, llama_server)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    summary = json.loads((out / "summary.json").read_text())
    steps = [s["step"] for s in summary["steps"]]
    assert "cmake configure" in steps and all(s["ok"] for s in summary["steps"])
    assert {"lab make dense-a0.8-tiny", "run moe-a0.9", "predict --calibrate dense-a0.8"} <= set(steps)
    for name in ("dense-a0.8", "moe-a0.9"):
        result = summary["results"][name]
        assert result["decisions"] and all("recommendation" in d for d in result["decisions"])
        assert {row["arm"] for row in result["arms"]} == {"baseline", "draft4", "draft8", "ngram-mod"}
        assert {a["arm"] for a in result["predict"]["arms"]} == {"draft4", "draft8", "ngram-mod"}
    assert "## dense-a0.8" in (out / "summary.md").read_text()
    with tarfile.open(out / "reports.tar.gz") as tar:
        names = set(tar.getnames())
    assert {f"runs/{n}/report/report.md" for n in ("dense-a0.8", "moe-a0.9")} <= names
    assert len(list(out.iterdir())) <= 8  # the device tool returns at most 8 files


def test_merge_defines_joins_flag_variables_instead_of_letting_the_last_win() -> None:
    args = ["-DGGML_CUDA=ON", "-DCMAKE_CXX_FLAGS=-mno-amx-tile", "-DCMAKE_CXX_FLAGS=-I/x/include"]
    merged = gpu_kit.merge_defines([*args, "-DCMAKE_CUDA_FLAGS=-I/x/include"])
    assert merged == [
        "-DGGML_CUDA=ON",
        "-DCMAKE_CXX_FLAGS=-mno-amx-tile -I/x/include",
        "-DCMAKE_CUDA_FLAGS=-I/x/include",
    ]


def test_cliff_plan_runs_the_dense_pair_with_ngram_drafts_either_side_of_a_16_token_verify() -> None:
    import gpu_run

    plan = gpu_run.Plan(**{**gpu_run.GPU_PLAN.__dict__, "arms": "cliff"})
    assert plan.pairs == (("dense", 0.8),)
    arms = gpu_run.cliff_arms()
    n_max = {name: int(args[args.index("--spec-ngram-mod-n-max") + 1]) for name, args in arms.items() if args}
    assert arms["baseline"] == [] and sorted(n + 1 for n in n_max.values()) == [9, 16, 17]


def test_concurrency_plan_sweeps_1_8_64_in_flight_with_a_slot_per_request(tmp_path: Path) -> None:
    """GPU_CHECK_ARMS=concurrency (issue 40): the dense pair's baseline, draft4 and ngram-mod at
    1, 8 and 64 in flight, 64 slots, three launches per arm; the matrix loads and plans."""
    import gpu_run
    import yaml

    from specbench.matrix.load import load_matrix

    plan = gpu_run.Plan(**{**gpu_run.GPU_PLAN.__dict__, "arms": "concurrency"})
    assert plan.pairs == (("dense", 0.8),)
    pair = tmp_path / "pair"
    pair.mkdir()
    for name in ("target.gguf", "draft.gguf"):
        (pair / name).write_bytes(b"")
    (pair / "truth.json").write_text(json.dumps({"alpha": 0.8, "vocab_size": 866, "cycle": list(range(40))}))
    path = gpu_run._write(tmp_path, gpu_run.concurrency_matrix(pair, plan, 8))
    matrix = yaml.safe_load(path.read_text())
    assert matrix["workload"]["suite"] == "concurrency-sweep" and matrix["workload"]["levels"] == [1, 8, 64]
    assert matrix["common_args"][matrix["common_args"].index("-np") + 1] == "64"
    assert set(matrix["arms"]) == {"baseline", "draft4", "ngram-mod"} and matrix["repeats"] == 3
    assert "-ngld" in matrix["arms"]["draft4"]
    assert load_matrix(path).workload.levels == (1, 8, 64)
