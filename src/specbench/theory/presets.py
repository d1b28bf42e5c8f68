"""Preset catalogs loaded from the YAML files in ``presets/`` (package data), and lookups.

A model may also be given as a path to a Hugging Face ``config.json`` (or its directory);
the GPU ``cpu`` is measured on this machine the first time it is asked for.

Names match case-insensitively ignoring spaces, dashes, dots and underscores::

    preset_key("RTX 3090") == preset_key("rtx-3090") == preset_key("rtx3090") == "rtx3090"
    preset_key("Q4_K_M") == preset_key("q4km")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, architecture_from_mapping
from specbench.theory.hardware import Gpu, gpu_from_mapping, probe_cpu
from specbench.theory.hf_config import load_hf_config

CPU = "cpu"

T = TypeVar("T")
_IGNORED = re.compile(r"[\s\-._]+")


def preset_key(name: str) -> str:
    """The normalised form: lower case, with spaces, dashes, dots and underscores removed."""
    return _IGNORED.sub("", name).lower()


@dataclass(frozen=True)
class Catalog(Generic[T]):
    """Presets of one kind (``model``, ``gpu``, ``quant``) under their display names.

    ``aliases`` maps extra spellings (already normalised) to a display name.
    """

    kind: str
    entries: Mapping[str, T]
    aliases: Mapping[str, str]

    def names(self) -> list[str]:
        """Display names, in file order."""
        return list(self.entries)

    def resolve(self, name: str) -> str:
        """The display name ``name`` refers to; ConfigError listing the known names if none."""
        wanted = preset_key(name)
        for display in self.entries:
            if preset_key(display) == wanted:
                return display
        if wanted in self.aliases:
            return self.aliases[wanted]
        raise ConfigError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")

    def get(self, name: str) -> T:
        return self.entries[self.resolve(name)]


def build_catalog(kind: str, entries: Mapping[str, T], aliases: Iterable[tuple[str, str]]) -> Catalog[T]:
    """A catalog whose alias keys are normalised; an alias clashing with a name is a ConfigError."""
    own = {preset_key(n) for n in entries}
    table: dict[str, str] = {}
    for alias, display in aliases:
        k = preset_key(alias)
        if k in own and preset_key(display) != k:
            raise ConfigError(f"{kind} alias {alias!r} clashes with a preset name")
        table[k] = display
    return Catalog(kind=kind, entries=dict(entries), aliases=table)


@dataclass(frozen=True)
class Quant:
    """A weight format: the average stored bits per weight of the body's mix and, where the
    format stores the LM head in a type of its own, that type's bits (``head_bits``)."""

    name: str
    bits: float
    head_bits: float | None = None

    @property
    def bytes_per_weight(self) -> float:
        return self.bits / 8

    @property
    def head_bytes_per_weight(self) -> float | None:
        return None if self.head_bits is None else self.head_bits / 8


def _read_yaml(filename: str) -> dict[str, Any]:
    text = resources.files("specbench.theory").joinpath("presets", filename).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ConfigError(f"preset file {filename} must be a mapping of names")
    return {str(k): v for k, v in data.items()}


def _aliases(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(a), name) for name, body in raw.items() for a in (body or {}).get("aliases", [])]


def _quant(name: str, body: Any) -> Quant:
    bits = body.get("bits") if isinstance(body, dict) else None
    if not isinstance(bits, (int, float)) or bits <= 0:
        raise ConfigError(f"quant {name!r}: bits must be a positive number")
    head = body.get("head_bits")
    if head is not None and (not isinstance(head, (int, float)) or head <= 0):
        raise ConfigError(f"quant {name!r}: head_bits must be a positive number")
    return Quant(name=name, bits=float(bits), head_bits=None if head is None else float(head))


@cache
def models() -> Catalog[Architecture]:
    raw = _read_yaml("models.yaml")
    entries = {
        n: architecture_from_mapping(n, {k: v for k, v in b.items() if k != "aliases"})
        for n, b in raw.items()
    }
    return build_catalog("model", entries, _aliases(raw))


@cache
def gpus() -> Catalog[Gpu]:
    raw = _read_yaml("gpus.yaml")
    return build_catalog("gpu", {n: gpu_from_mapping(n, b) for n, b in raw.items()}, _aliases(raw))


@cache
def quants() -> Catalog[Quant]:
    raw = _read_yaml("quants.yaml")
    return build_catalog("quant", {n: _quant(n, b) for n, b in raw.items()}, _aliases(raw))


@cache
def cpu() -> Gpu:
    """This machine, measured once per process."""
    return probe_cpu()


def _is_path(name: str) -> bool:
    return name.endswith(".json") or Path(name).exists()


def get_model(name: str) -> Architecture:
    """A preset by (spelling-insensitive) name, or a Hugging Face config.json by path.

    A repository id such as ``Qwen/Qwen3.6-27B`` resolves to the preset ``Qwen3.6-27B``.
    """
    if _is_path(name):
        return load_hf_config(name)
    catalog = models()
    try:
        return catalog.get(name.rsplit("/", 1)[-1])
    except ConfigError:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(catalog.names())}") from None


def load_gpu_file(path: str | Path) -> Gpu:
    """A device described in a YAML file: the preset fields as one mapping (named after the
    file), or one ``name: {fields}`` entry. Bad files are a ConfigError naming the file."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read hardware file {str(p)!r}: {err}") from None
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), dict):
        name, body = next(iter(data.items()))
        return gpu_from_mapping(str(name), body)
    if not isinstance(data, dict):
        raise ConfigError(f"hardware file {str(p)!r} must hold a mapping of device fields")
    return gpu_from_mapping(str(data.pop("name", p.stem)), data)


def get_gpu(name: str) -> Gpu:
    """A preset GPU, a hardware YAML file by path, or ``cpu`` (measured); unknown names list the
    known ones."""
    if preset_key(name) == CPU:
        return cpu()
    if name.endswith((".yaml", ".yml")) or Path(name).is_file():
        return load_gpu_file(name)
    try:
        return gpus().get(name)
    except ConfigError:
        raise ConfigError(f"unknown gpu {name!r}; known: {', '.join([*gpus().names(), CPU])}") from None


def get_quant(name: str) -> Quant:
    return quants().get(name)


def list_presets() -> dict[str, list[str]]:
    """Display names by kind: ``{"models": [...], "gpus": [..., "cpu"], "quants": [...]}``."""
    return {"models": models().names(), "gpus": [*gpus().names(), CPU], "quants": quants().names()}
