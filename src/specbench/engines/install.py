"""Build ``llama-server`` from the pinned llama-cpp-python sdist into the cache, once.

The sdist vendors llama.cpp (0.3.36 → commit 0c1e570, with every speculative type), so the
only thing fetched is a package from the Python package index. Only the ``llama-server``
target is built, statically linked, so the cached binary is self-contained.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import ConfigError, InstallError
from specbench.store.paths import cache_dir

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
ENV_BINARY = "SPECBENCH_LLAMA_SERVER"
MIN_FREE_BYTES = 3 * 1024**3

Progress = Callable[[int, int, str], None]  # (done, total, current line)


#: Compiled out of native builds: ggml's AMX matmul segfaults on Q4_K weights on Sapphire Rapids
#: (ggml-org/llama.cpp#20824, closed unfixed; seen here on Gemma 3 270M Q4_K_M in the first decode
#: after the weights were repacked into the AMX buffer). -march=native turns AMX on where the CPU
#: has it; explicit -mno-* flags win over -march in GCC and Clang whatever their order. The CPU
#: still uses its AVX-512/AVX2 kernels and repacking.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


@dataclass(frozen=True)
class BuildOptions:
    cuda: bool = False
    native: bool = True

    @property
    def key(self) -> str:
        kind = "cuda" if self.cuda else "cpu"
        return f"{LLAMA_CPP_PYTHON_VERSION}-{kind}{'-noamx' if self.native else '-portable'}"

    def cmake_args(self) -> list[str]:
        args = [
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=ON",
            "-DLLAMA_BUILD_UI=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF",  # would download the web UI at configure time
            "-DLLAMA_OPENSSL=OFF",
            f"-DGGML_NATIVE={'ON' if self.native else 'OFF'}",
            *([f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"] if self.native else []),
        ]
        return [*args, "-DGGML_CUDA=ON"] if self.cuda else args


def install_root() -> Path:
    return cache_dir() / "llama-server"


def cached_binary(options: BuildOptions) -> Path:
    return install_root() / options.key / "bin" / "llama-server"


def find_llama_server(explicit: str | None = None, options: BuildOptions | None = None) -> Path | None:
    """A user's own build (argument, then ``$SPECBENCH_LLAMA_SERVER``), else the cached build."""
    given = explicit or os.environ.get(ENV_BINARY)
    if given:
        path = Path(given).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            source = "--llama-server" if explicit else f"${ENV_BINARY}"
            raise InstallError(f"{source}: {path} is not an executable file")
        return path
    binary = cached_binary(options or BuildOptions())
    return binary if binary.is_file() else None


def check_executable(value: str, field: str) -> None:
    """``field``'s value names an executable file (a matrix field, named in the error)."""
    path = Path(value).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(f"{field}: {path} is not an executable file")


def install_llamacpp(
    options: BuildOptions, jobs: int | None = None, progress: Progress | None = None
) -> Path:
    """Return the cached binary, building it first if needed."""
    binary = cached_binary(options)
    if binary.is_file():
        return binary
    _check_prerequisites(options)
    source = fetch_source(install_root() / "src")
    build_dir = install_root() / options.key / "build"
    _configure(source, build_dir, options)
    _build(build_dir, jobs or os.cpu_count() or 2, progress)
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build_dir / "bin" / "llama-server", binary)
    _write_build_info(binary.parent.parent, options)
    shutil.rmtree(build_dir, ignore_errors=True)  # several hundred MB of objects
    return binary


def _check_prerequisites(options: BuildOptions) -> None:
    root = install_root()
    root.mkdir(parents=True, exist_ok=True)
    if shutil.disk_usage(root).free < MIN_FREE_BYTES:
        raise InstallError(f"less than 3 GB free under {root}: free some space or set SPECBENCH_CACHE")
    if shutil.which("cmake") is None:
        raise InstallError("cmake not found: install it (apt-get install cmake, or pip install cmake)")
    if not any(shutil.which(cc) for cc in ("c++", "g++", "clang++")):
        raise InstallError("no C++ compiler found: install one (apt-get install build-essential)")
    if options.cuda and shutil.which("nvcc") is None:
        raise InstallError("--cuda: nvcc not found; install the CUDA toolkit or drop --cuda")


def fetch_source(dest: Path) -> Path:
    tree = dest / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    if (tree / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        return tree / "vendor" / "llama.cpp"
    dest.mkdir(parents=True, exist_ok=True)
    spec = f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        spec,
        "-d",
        str(dest),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(
            f"could not fetch {spec} from the package index ({last}); check network access "
            f"or pass --llama-server PATH"
        )
    with tarfile.open(dest / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return tree / "vendor" / "llama.cpp"


def _configure(source: Path, build_dir: Path, options: BuildOptions) -> None:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    cmd = ["cmake", "-S", str(source), "-B", str(build_dir), *generator, *options.cmake_args()]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InstallError(f"cmake configure failed: {failure_line(done.stdout + done.stderr)}")


_STEP = re.compile(r"^\[\s*(\d+)/(\d+)\]|^\[\s*(\d+)%\]")


def _build(build_dir: Path, jobs: int, progress: Progress | None) -> None:
    cmd = ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-40:], line.rstrip()]
        match = _STEP.match(line)
        if match and progress:
            done, total = (int(match[1]), int(match[2])) if match[1] else (int(match[3]), 100)
            progress(done, total, line.strip())
    if proc.wait() != 0:
        raise InstallError(f"building llama-server failed: {failure_line(chr(10).join(tail))}")


def failure_line(output: str) -> str:
    if "No space left" in output:
        return "the disk is full; free some space or set SPECBENCH_CACHE to a larger disk"
    errors = [ln for ln in output.splitlines() if "error" in ln.lower()]
    return (errors or output.strip().splitlines() or ["no output"])[-1].strip()


def _write_build_info(root: Path, options: BuildOptions) -> None:
    info = {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "cuda": options.cuda,
        "native": options.native,
        "cmake_args": options.cmake_args(),
    }
    (root / "build.json").write_text(json.dumps(info, indent=1))


def build_info(binary: Path) -> dict[str, object]:
    """Build options recorded next to a cached binary; empty for a user's own build."""
    path = binary.parent.parent / "build.json"
    return json.loads(path.read_text()) if path.is_file() else {}
