"""Matrix file → validated, frozen configuration and the cells the runner executes.

A matrix names an engine, a model, arguments shared by every arm, the arms (each adds
arguments), a workload and how often to repeat. Errors name the file, line and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specbench.errors import ConfigError

EngineKind = Literal["llamacpp", "vllm", "sglang", "openai"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkloadSpec(_Frozen):
    """What to send. ``suite`` picks prompts and shapes; the rest override the suite."""

    suite: str = "single"
    max_tokens: int | None = Field(None, gt=0, description="default: the suite's")
    temperature: float = Field(0.0, ge=0.0)
    prompts: int | None = Field(None, gt=0, description="number of prompts (default: the suite's)")
    prompt_file: str | None = None
    categories: tuple[str, ...] | None = None
    ignore_eos: bool | None = Field(None, description="default: the suite's (sweeps force the length)")
    scale: float = Field(
        1.0, gt=0.0, description="multiplies the suite's token lengths, e.g. 0.05 for CPU lab models"
    )
    input_tokens: int | None = Field(None, gt=0, description="prompt length target (default: the suite's)")
    lengths: tuple[int, ...] | None = Field(None, description="length-sweep: max_tokens values")
    levels: tuple[int, ...] | None = Field(None, description="concurrency-sweep: requests in flight")
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="merged into every request, e.g. chat_template_kwargs, reasoning budget",
    )
    request_rate: float | None = Field(
        None, gt=0.0, description="open loop: requests per second (default: closed loop)"
    )
    burstiness: float = Field(1.0, gt=0.0, description="gamma shape of the arrivals: 1 Poisson, <1 burstier")
    ramp_up_s: float = Field(0.0, ge=0.0, description="open loop: ramp the rate up linearly over this")


class Matrix(_Frozen):
    engine: EngineKind = "llamacpp"
    model: str = ""  # required unless engine is openai (attach)
    common_args: tuple[str, ...] = ()
    arms: dict[str, tuple[str, ...]] = Field(default_factory=lambda: {"baseline": tuple[str, ...]()})
    baseline: str = "baseline"
    workload: WorkloadSpec = WorkloadSpec()
    repeats: int = Field(3, gt=0)
    warmup: int = Field(1, ge=0, description="warmup requests per cell, stored but flagged")
    seed: int = 0
    concurrency: int | None = Field(None, gt=0, description="requests in flight (default: the suite's)")
    request_timeout: float = Field(300.0, gt=0)
    startup_timeout: float = Field(180.0, gt=0)
    host: str = "127.0.0.1"
    forward_probe: bool = Field(
        True, description="time target prefills of 1..65 tokens in the baseline arm (verify cost)"
    )
    engine_binary: str | None = None
    env: dict[str, str] = {}
    resources: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Ray executor: per arm (or '*') resources, e.g. num_gpus, 'accelerator_type:H100'",
    )

    @field_validator("arms")
    @classmethod
    def _some_arms(cls, arms: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if not arms:
            raise ValueError("at least one arm is needed")
        bad = [name for name in arms if not name.replace("-", "").replace("_", "").isalnum()]
        if bad:
            raise ValueError(f"arm names may use letters, digits, '-' and '_' only: {bad}")
        return arms

    @model_validator(mode="after")
    def _baseline_is_an_arm(self) -> Matrix:
        if self.engine == "openai":
            return self  # attach mode: the arm is named on the command line (--arm)
        if not self.model:
            raise ValueError(f"model: required for engine {self.engine}")
        if self.baseline not in self.arms:
            raise ValueError(f"baseline {self.baseline!r} is not one of the arms {list(self.arms)}")
        return self

    @model_validator(mode="after")
    def _resources_name_arms(self) -> Matrix:
        unknown = sorted(set(self.resources) - {*self.arms, "*"})
        if unknown:
            raise ValueError(f"resources name no arm: {unknown} (arms: {list(self.arms)}, or '*')")
        return self

    def arm_args(self, arm: str) -> list[str]:
        return [*self.common_args, *self.arms[arm]]


# Flags whose value is a file that must exist before anything launches.
FILE_FLAGS = frozenset({"-m", "--model", "-md", "--model-draft", "--spec-draft-model"})


def load_matrix(path: Path) -> Matrix:
    """Parse, validate and resolve relative paths against the matrix file's folder."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such matrix file")
    text = path.read_text()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a matrix must be a mapping with at least 'model' and 'arms'")
    try:
        matrix = Matrix.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_error(path, text, exc)) from exc
    return resolve_paths(matrix, path.parent)


def _first_error(path: Path, text: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc) or "(top level)"
    line = _line_of(text, loc)
    where = f"{path}:{line}" if line else str(path)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown field (known: {', '.join(_known_fields(loc))})"
    return f"{where}: {field}: {msg}"


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = WorkloadSpec if loc and loc[0] == "workload" else Matrix
    return sorted(model.model_fields)


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML key at ``loc`` (or of its deepest existing parent)."""
    node: Any = yaml.compose(text)
    line = None
    for key in loc:
        found = _child(node, key)
        if found is None:
            break
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _child(node: Any, key: Any) -> tuple[Any, Any] | None:
    """(key node, value node) of ``key`` inside a mapping or sequence node."""
    if isinstance(node, yaml.MappingNode):
        return next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(key)), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key], node.value[key]
    return None


def resolve_paths(matrix: Matrix, base: Path) -> Matrix:
    """Make model and file-flag paths absolute (relative to the matrix file) and check they exist."""
    if matrix.engine != "llamacpp":
        return matrix
    model = _existing(base, matrix.model, "model")
    arms = {name: _resolve_args(base, args, f"arms.{name}") for name, args in matrix.arms.items()}
    common = _resolve_args(base, matrix.common_args, "common_args")
    return matrix.model_copy(update={"model": model, "arms": arms, "common_args": common})


def _resolve_args(base: Path, args: tuple[str, ...], where: str) -> tuple[str, ...]:
    out = list(args)
    for i, flag in enumerate(args[:-1]):
        if flag in FILE_FLAGS:
            out[i + 1] = _existing(base, args[i + 1], f"{where}: {flag}")
    return tuple(out)


def _existing(base: Path, value: str, what: str) -> str:
    path = (base / value).expanduser() if not Path(value).is_absolute() else Path(value)
    if not path.is_file():
        raise ConfigError(f"{what}: model file {path} does not exist")
    return str(path.resolve())


class RequestSpec(_Frozen):
    """One request as sent to every arm and repeat: matched arms get identical requests."""

    prompt_id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    max_tokens: int
    temperature: float
    seed: int
    ignore_eos: bool = False
    phase: str = "main"
    concurrency: int | None = None  # None: the cell's
    target_tokens: int | None = None  # prompt length to reach with /tokenize before the first cell
    fill_key: str | None = None  # requests with one key share one filler text (default: own prompt id)
    tools: tuple[dict[str, Any], ...] | None = None
    extra: dict[str, Any] = {}

    def echo(self, fitted_tokens: int | None = None) -> dict[str, Any]:
        """What a record keeps of its request (the messages live in the manifest / fitted prompts)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "ignore_eos": self.ignore_eos,
            "target_tokens": self.target_tokens,
            "fitted_tokens": fitted_tokens,
            "tools": len(self.tools or ()),
        }


class RunSpec(_Frozen):
    """One cell: an arm served once, for one repeat, running ``requests`` after ``warmup`` ones."""

    arm: str
    repeat: int
    workload: str
    args: tuple[str, ...]
    requests: tuple[RequestSpec, ...]
    warmup: tuple[RequestSpec, ...]
    concurrency: int


def plan_cells(
    matrix: Matrix, requests: tuple[RequestSpec, ...], warmup: tuple[RequestSpec, ...], concurrency: int
) -> list[RunSpec]:
    """Cells in execution order: arms interleaved ABBA across repeats, so slow drift
    (thermal, background load) hits every arm alike instead of the last one."""
    arms = list(matrix.arms)
    cells = []
    for repeat in range(matrix.repeats):
        order = arms if repeat % 2 == 0 else arms[::-1]
        for arm in order:
            cells.append(
                RunSpec(
                    arm=arm,
                    repeat=repeat,
                    workload=matrix.workload.suite,
                    args=tuple(matrix.arm_args(arm)),
                    requests=requests,
                    warmup=warmup,
                    concurrency=concurrency,
                )
            )
    return cells
