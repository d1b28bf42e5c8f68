"""The GPU check kit (issue 34): a trimmed llama.cpp source tarball plus wheels, and the build step.

Three verbs, driven by ``bench/gpu_prepare.sh`` (here, with network) and ``bench/gpu_check.sh``
(on the lent GPU machine, no network; see docs/gpu.md):

    python bench/gpu_kit.py prepare [--kit gpu-kit] [--no-wheels]
    python bench/gpu_kit.py build OUTDIR       # on the device: wheels, untar, cmake, ninja
    (the run step lives in bench/gpu_run.py)

Layout under the kit folder (ignored by git): ``dist/`` travels to the device (``carry``), ``work/``
is made there and survives between two calls on the same warm machine (ignored build outputs are
kept there), so ``dist/`` can be carried again without wiping the build.

The build step needs only the standard library until the wheels are installed, and every step
appends its wall time to ``work/state.json``, which the run step's summary reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARBALL = "llama.cpp-src.tar.gz"
LIMIT_BYTES = 64 * 1024**2  # the device tool's limit on what travels, working tree included

# Top-level folders and files of llama.cpp that a llama-server build never reads. The build runs
# with LLAMA_BUILD_TESTS/EXAMPLES=OFF (so tests/, examples/, pocs/ are never added); the top-level
# models/ holds test vocabularies (75 MB) and is not src/models or tools/mtmd/models, which stay.
DROP_TOP = frozenset({
    ".github", ".devops", "docs", "models", "examples", "tests", "benches", "media", "ci", "pocs",
    "gguf-py", "conversion", "skills", "requirements", "grammars", "flake.nix",
})  # fmt: skip
# ggml backends other than CPU and CUDA: each is only add_subdirectory'd when its GGML_<X> option
# is ON, and all are OFF by default on Linux. ggml-hip/ggml-musa reuse ggml-cuda's sources.
DROP_BACKENDS = frozenset({
    "ggml-vulkan", "ggml-metal", "ggml-sycl", "ggml-opencl", "ggml-cann", "ggml-musa", "ggml-hip",
    "ggml-kompute", "ggml-webgpu", "ggml-hexagon", "ggml-openvino", "ggml-zdnn", "ggml-zendnn",
    "ggml-virtgpu", "ggml-et", "ggml-rpc",
})  # fmt: skip
# The web UI's npm tests (LLAMA_BUILD_UI=OFF never runs npm; its sources stay, being cheap).
DROP_PATHS = ("tools/ui/tests",)

# Packages specbench imports that the device image lacks or may hold in an older version (KINDS.md
# lists the image's packages): carried as cp312 manylinux wheels, installed with --no-deps.
WHEELS = (
    "pydantic", "pydantic_core", "annotated-types", "typing-inspection", "typing_extensions",
    "rapidfuzz", "gguf", "typer", "rich", "shellingham", "annotated-doc",
    "markdown-it-py", "mdurl",
)  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


def keep(rel: str) -> bool:
    """Whether the path ``rel`` (relative to the llama.cpp root, POSIX) goes into the tarball."""
    parts = PurePosixPath(rel).parts
    if not parts or parts[0] in DROP_TOP:
        return False
    if len(parts) == 1 and parts[0].endswith(".py"):  # convert_*.py
        return False
    if parts[:2] == ("ggml", "src") and len(parts) >= 3 and parts[2] in DROP_BACKENDS:
        return False
    return not any(rel == p or rel.startswith(p + "/") for p in DROP_PATHS)


def trimmed_files(root: Path) -> list[str]:
    """Every file under ``root`` that :func:`keep` keeps, sorted (relative POSIX paths)."""
    kept = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and keep(rel):
            kept.append(rel)
    return kept


def write_tarball(root: Path, out: Path, prefix: str = "llama.cpp") -> int:
    """Write the trimmed tree as ``out`` (gzip); return its size in bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part")
    with tarfile.open(tmp, "w:gz", compresslevel=9) as tar:
        for rel in trimmed_files(root):
            tar.add(root / rel, arcname=f"{prefix}/{rel}", recursive=False)
    tmp.replace(out)
    return out.stat().st_size


def pinned_source() -> Path:
    """The llama.cpp tree specbench builds from (the cached llama-cpp-python sdist), fetched if absent."""
    sys.path.insert(0, str(REPO / "src"))
    from specbench.engines import install

    return install.fetch_source(install.install_root() / "src")


def download_wheels(dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    versions = _local_versions()
    specs = [f"{name}=={versions[_norm(name)]}" if _norm(name) in versions else name for name in WHEELS]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest), *specs]
    subprocess.run(cmd, check=True)
    return sum(p.stat().st_size for p in dest.glob("*.whl"))


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _local_versions() -> dict[str, str]:
    """The versions this machine's venv tests with, so the device runs the same ones."""
    from importlib import metadata

    return {_norm(d.metadata["Name"]): d.version for d in metadata.distributions()}


def prepare(kit: Path, wheels: bool) -> dict[str, Any]:
    source = pinned_source()
    dist = kit / "dist"
    size = write_tarball(source, dist / TARBALL)
    wheel_bytes = download_wheels(dist / "wheels") if wheels else 0
    total = sum(p.stat().st_size for p in dist.rglob("*") if p.is_file())
    info = {"source": str(source), "tarball_bytes": size, "wheels_bytes": wheel_bytes, "dist_bytes": total}
    (dist / "kit.json").write_text(json.dumps(info, indent=1))
    mib = 1024**2
    print(f"tarball {size / mib:.1f} MiB, wheels {wheel_bytes / mib:.1f} MiB, dist/ {total / mib:.1f} MiB")
    if total > LIMIT_BYTES // 2:
        print(f"WARNING: {dist} is over half the 64 MiB the device call may carry", file=sys.stderr)
    return info


# --- on the device -----------------------------------------------------------------------------


class Steps:
    """Wall time of every step, kept in work/state.json across the build and run invocations."""

    def __init__(self, work: Path, budget_s: float) -> None:
        self.path = work / "state.json"
        self.deadline = time.monotonic() + budget_s
        work.mkdir(parents=True, exist_ok=True)
        self.state: dict[str, Any] = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.state.setdefault("steps", [])

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, step: str, seconds: float, ok: bool, note: str = "") -> None:
        row = {"step": step, "seconds": round(seconds, 1), "ok": ok, "note": note, "at": time.time()}
        self.state["steps"].append(row)
        self.save()
        print(f"[gpu_check] {step}: {'ok' if ok else 'NOT DONE'} in {seconds:.1f} s {note}", flush=True)

    def save(self) -> None:
        self.path.write_text(json.dumps(self.state, indent=1))


def run_logged(cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None) -> int | None:
    """Run ``cmd`` appending to ``log``; the exit code, or None when it ran out of time (stopped with
    SIGINT, so llama.cpp's ninja and specbench's run both leave resumable state)."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            return proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(2)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return None


def gpu_facts() -> dict[str, str]:
    """nvidia-smi's name, driver, memory and compute capability (empty without a GPU)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    fields = "name,driver_version,memory.total,compute_cap"
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True
    )
    values = [v.strip() for v in done.stdout.splitlines()[0].split(",")] if done.returncode == 0 else []
    return dict(zip(fields.split(","), values, strict=False))


def cmake_args(arch: str) -> list[str]:
    """specbench's own build options (``engine install llamacpp --cuda``) plus what keeps the CUDA
    compile short: one architecture, no extra flash-attention quant kernels, no unified app."""
    from specbench.engines.install import BuildOptions

    extra = ["-DGGML_CUDA_FA_ALL_QUANTS=OFF", "-DLLAMA_BUILD_APP=OFF"]
    if arch:
        extra.append(f"-DCMAKE_CUDA_ARCHITECTURES={arch}")
    return [*BuildOptions(cuda=bool(arch)).cmake_args(), *extra]


def cublas_hints() -> tuple[list[str], str]:
    """CMake flags for cuBLAS when the CUDA toolkit has none, and the folder its libraries are in.

    An nvcc assembled from pip wheels (as on this project's machines: /usr/local/cuda-13.0 with a
    dist-info folder) has no cuBLAS, so ggml-cuda's configure fails on ``CUDA::cublas``; PyTorch's
    ``nvidia-cublas`` wheel carries it (``nvidia/cu13/{include,lib}``), so point CMake at that.
    """
    nvcc = shutil.which("nvcc")
    toolkit = Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")
    if (toolkit / "include" / "cublas_v2.h").is_file():
        return [], ""
    for root in map(Path, [p for p in sys.path if p]):
        for header in sorted(root.glob("nvidia/*/include/cublas_v2.h")):
            lib = header.parent.parent / "lib"
            blas, blas_lt = sorted(lib.glob("libcublas.so*")), sorted(lib.glob("libcublasLt.so*"))
            if blas and blas_lt:
                flags = f"-I{header.parent}"
                hints = [f"-DCUDA_cublas_LIBRARY={blas[0]}", f"-DCUDA_cublasLt_LIBRARY={blas_lt[0]}"]
                return [*hints, f"-DCMAKE_CUDA_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"], str(lib)
    return [], ""


def driver_hints() -> list[str]:
    """ggml-cuda links libcuda (the driver) for its VMM memory pool. A toolkit without stubs finds
    no ``libcuda.so``; name the driver's ``libcuda.so.1`` then, or, where none exists (this CPU
    machine), build without VMM, which links no driver library (the legacy pool instead)."""
    nvcc = shutil.which("nvcc")
    toolkit = Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")
    if any((toolkit / d / "stubs" / "libcuda.so").is_file() for d in ("lib64", "lib")):
        return []
    listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    found = [ln.split("=>")[-1].strip() for ln in listed.splitlines() if "libcuda.so" in ln and "=>" in ln]
    dirs = ("/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib")
    found += [str(p) for d in dirs for p in sorted(Path(d).glob("libcuda.so*"))]
    if found:
        return [f"-DCUDA_cuda_driver_LIBRARY={found[0]}"]
    return ["-DGGML_CUDA_NO_VMM=ON"]


def merge_defines(args: list[str]) -> list[str]:
    """One ``-DNAME=`` per flag variable: CMake keeps only the last of two, and specbench's own
    options already set CMAKE_CXX_FLAGS (its no-AMX flags), which the cuBLAS include must join."""
    merged: dict[str, str] = {}
    rest = []
    for arg in args:
        name, _, value = arg.partition("=")
        if name.startswith("-D") and name.endswith("_FLAGS"):
            merged[name] = f"{merged[name]} {value}" if name in merged else value
        else:
            rest.append(arg)
    return [*rest, *(f"{name}={value}" for name, value in merged.items())]


def install_wheels(kit: Path, steps: Steps, log: Path) -> bool:
    site, wheels = kit / "work" / "site", sorted((kit / "dist" / "wheels").glob("*.whl"))
    if (site / ".done").is_file() or not wheels:
        return True
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    code = run_logged([*cmd, "--upgrade", "--target", str(site), *map(str, wheels)], log, steps.left())
    (site / ".done").touch() if code == 0 else None
    steps.record("install wheels", time.monotonic() - start, code == 0, f"{len(wheels)} wheels")
    return code == 0


IMPORT_CHECK = (
    "import importlib.metadata as m, specbench.cli, specbench.report, specbench.theory, scipy.stats;"
    "print(*(f'{n} {m.version(n)}' for n in ('numpy', 'scipy', 'pandas', 'pyarrow', 'matplotlib',"
    " 'pydantic', 'typer', 'gguf', 'aiohttp')), sep='; ')"
)


def import_check(work: Path, steps: Steps, log: Path) -> bool:
    """specbench imports with this Python and the carried wheels (versions into the log), so a
    missing or too old package shows in the build call, before the run call spends its minutes."""
    start = time.monotonic()
    path = os.pathsep.join([str(work / "site"), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    code = run_logged([sys.executable, "-c", IMPORT_CHECK], log, min(steps.left(), 120), env)
    steps.record("import check", time.monotonic() - start, code == 0, "" if code == 0 else f"see {log.name}")
    return code == 0


def build(kit: Path, out: Path, cpu: bool, budget_s: float) -> int:
    """Untar, configure and build llama-server (CUDA: the present GPU's architecture only)."""
    work, log = kit / "work", out / "build.log"
    steps = Steps(work, budget_s)
    out.mkdir(parents=True, exist_ok=True)
    facts = gpu_facts()
    steps.state["gpu"] = facts
    # the rehearsal uses this machine's venv (Python 3.11: the cp312 wheels would not fit)
    if not cpu and not install_wheels(kit, steps, log):
        return 1
    sys.path[:0] = [str(work / "site"), str(REPO / "src")]
    if not import_check(work, steps, log):
        return 1
    src, build_dir, binary = work / "src" / "llama.cpp", work / "build", work / "bin" / "llama-server"
    if binary.is_file():
        print(f"[gpu_check] {binary} is built already")
        return 0
    tarball = kit / "dist" / TARBALL
    if not (src / "CMakeLists.txt").is_file():
        start = time.monotonic()
        with tarfile.open(tarball) as tar:
            tar.extractall(work / "src", filter="data")
        steps.record("untar source", time.monotonic() - start, True, f"{tarball.stat().st_size} bytes")
    arch = "" if cpu else facts.get("compute_cap", "native").replace(".", "") or "native"
    hints, libs = ([], "") if cpu else cublas_hints()
    hints += [] if cpu else driver_hints()
    args = merge_defines([*cmake_args(arch), *hints])
    steps.state.update(cmake_args=args, ld_library_path=libs)
    if not (build_dir / "build.ninja").is_file():
        start = time.monotonic()
        code = run_logged(
            ["cmake", "-S", str(src), "-B", str(build_dir), "-G", "Ninja", *args], log, steps.left()
        )
        note = f"arch={arch or 'cpu'}" + (f", cuBLAS from {libs}" if libs else "")
        steps.record("cmake configure", time.monotonic() - start, code == 0, note)
        if code != 0:
            shutil.rmtree(build_dir, ignore_errors=True)  # a failed configure must not look done
            return 3
    if cpu:  # the rehearsal checks the trimmed tree configures; the CPU binary comes from the cache
        return 0
    start = time.monotonic()
    jobs = str(os.cpu_count() or 16)
    code = run_logged(["ninja", "-C", str(build_dir), "-j", jobs, "llama-server"], log, steps.left() - 20)
    steps.record(
        "ninja llama-server", time.monotonic() - start, code == 0, "" if code == 0 else "rerun build"
    )
    if code != 0:
        return 3 if code is not None else 75
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build_dir / "bin" / "llama-server", binary)
    write_build_info(work, args)
    return 0


def write_build_info(work: Path, args: list[str]) -> None:
    """``build.json`` beside ``bin/``, as ``specbench engine install`` writes it: the run's env.json
    then says this is a CUDA build, which is how ``predict --calibrate`` picks the GPU preset."""
    from specbench.engines.install import LLAMA_CPP_COMMIT, LLAMA_CPP_PYTHON_VERSION

    info: dict[str, Any] = {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
    }
    info |= {"cuda": True, "native": True, "cmake_args": args, "built_by": "bench/gpu_kit.py"}
    (work / "build.json").write_text(json.dumps(info, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("verb", choices=["prepare", "build"])
    parser.add_argument("out", nargs="?", type=Path, help="build: the output folder ($OUT)")
    parser.add_argument("--kit", type=Path, default=REPO / "gpu-kit")
    parser.add_argument("--no-wheels", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="rehearsal: configure only, no CUDA")
    parser.add_argument("--budget", type=float, default=float(os.environ.get("GPU_CHECK_BUDGET_S", 555)))
    args = parser.parse_args(argv)
    if args.verb == "prepare":
        prepare(args.kit, wheels=not args.no_wheels)
        return 0
    if args.out is None:
        parser.error("build needs OUTDIR")
    try:
        return build(args.kit, args.out, args.cpu, args.budget)
    finally:  # the build call's own record ($OUT is emptied before the run call)
        state = args.kit / "work" / "state.json"
        if state.is_file():
            shutil.copy2(state, args.out / "state.json")


if __name__ == "__main__":
    sys.exit(main())
