"""Matrix data → validated, frozen configuration and the cells the runner executes.

A matrix names an engine, a model, arguments shared by every arm, the arms (each adds
arguments), a workload and how often to repeat. :mod:`specbench.matrix.load` reads a matrix file
into a :class:`Matrix`; its errors name the file, line and field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specbench.engines import DEFAULT_ENGINE, ENGINES, kinds
from specbench.matrix.names import check_arm_name, check_env, no_nul, path_ok
from specbench.matrix.tuneblock import TuneSpec

# The kinds a matrix may name, from the one registry. A Literal still, so pydantic's error
# ("Input should be ... or ...") and the schema list them; the type checker, which cannot read a
# Literal built at run time, sees the str it is.
if TYPE_CHECKING:
    EngineKind = str
else:
    EngineKind = Literal[kinds(lambda c: c.selectable)]

# Bounds: large enough for any real benchmark, small enough that a typo (repeats: 1e9) is an
# error at once instead of a run that hangs with no output.
MAX_TOKENS = 1_000_000
MAX_REPEATS = 1000
MAX_WARMUP = 100
MAX_CONCURRENCY = 4096
MAX_PROMPTS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_RATE = 1_000_000.0  # requests per second
# Request fields specbench sets itself: extra_body may not change what is measured.
RESERVED_BODY = frozenset(
    {"messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stream",
     "stream_options", "tools", "n"}
)  # fmt: skip
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


#: The measures an answer can be decided by (analysis/measures.py says what each one is).
Objective = Literal["decode", "throughput", "goodput", "ttft_p50", "ttft_p99", "e2e_p50", "e2e_p99"]


class WorkloadSpec(_Frozen):
    """What to send. ``suite`` picks prompts and shapes; the rest override the suite."""

    name: str | None = Field(
        None, description="names the workload in records and the report (default: the suite's name)"
    )
    suite: str = "single"
    max_tokens: int | None = Field(None, gt=0, le=MAX_TOKENS, description="default: the suite's")
    temperature: float = Field(0.0, ge=0.0, le=100.0, allow_inf_nan=False)
    prompts: int | None = Field(
        None, gt=0, le=MAX_PROMPTS, description="number of prompts (default: the suite's)"
    )
    prompt_file: str | None = None

    @field_validator("prompt_file")
    @classmethod
    def _prompt_file_path(cls, value: str | None) -> str | None:
        return path_ok(value)

    categories: tuple[str, ...] | None = None
    ignore_eos: bool | None = Field(None, description="default: the suite's (sweeps force the length)")
    scale: float = Field(
        1.0,
        gt=0.0,
        le=100.0,
        allow_inf_nan=False,
        description="multiplies the suite's token lengths, e.g. 0.05 for CPU lab models",
    )
    input_tokens: int | None = Field(
        None, gt=0, le=MAX_TOKENS, description="prompt length target (default: the suite's)"
    )
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
    rates: tuple[float, ...] | None = Field(None, description="rate-sweep: request rates, one phase each")
    objective: Objective | None = Field(
        None,
        description="the measure that decides the answer at each operating point (default: the suite's: "
        "decode for batch-1 suites, throughput for concurrent ones, goodput for rate sweeps)",
    )

    @property
    def label(self) -> str:
        return self.name or self.suite

    @field_validator("name")
    @classmethod
    def _name_is_a_word(cls, name: str | None) -> str | None:
        """It keys records and names report sections: a word, like an arm name."""
        try:
            return None if name is None else check_arm_name(name)
        except ValueError:
            raise ValueError(f"workload names may use letters, digits, '-' and '_' only: {name!r}") from None

    @field_validator("lengths", "levels")
    @classmethod
    def _positive(cls, values: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if values is not None and (not values or any(v <= 0 or v > MAX_TOKENS for v in values)):
            raise ValueError(f"needs at least one value, each between 1 and {MAX_TOKENS}")
        return values

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, values: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if values is not None and (not values or any(not 0 < v <= MAX_RATE for v in values)):
            raise ValueError(f"needs at least one request rate, each above 0 and at most {MAX_RATE:g}/s")
        return None if values is None else tuple(sorted(set(values)))

    @field_validator("extra_body")
    @classmethod
    def _not_reserved(cls, body: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(RESERVED_BODY & set(body))
        if taken:
            raise ValueError(f"{taken} are set by specbench (use the workload fields instead)")
        return body


class SLOSpec(_Frozen):
    """Service-level objectives a request must all meet to count toward goodput (the keys of
    ``vllm bench serve --goodput``: ttft, tpot, e2el, in ms; a bound is met at equality)."""

    ttft_ms: float | None = Field(None, gt=0, le=MAX_SECONDS * 1000, allow_inf_nan=False)
    tpot_ms: float | None = Field(None, gt=0, le=MAX_SECONDS * 1000, allow_inf_nan=False)
    e2e_ms: float | None = Field(None, gt=0, le=MAX_SECONDS * 1000, allow_inf_nan=False)
    attainment: float = Field(
        0.9, gt=0.0, le=1.0, description="rate sweeps: share of requests meeting them for a rate to pass"
    )

    @model_validator(mode="after")
    def _some_bound(self) -> SLOSpec:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2e_ms")
        return self

    def bounds(self) -> dict[str, float]:
        """Metric column → its bound, for the bounds given."""
        given = {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}
        return {k: v for k, v in given.items() if v is not None}


class Matrix(_Frozen):
    engine: EngineKind = DEFAULT_ENGINE
    model: str = ""  # required unless engine is openai (attach)
    common_args: tuple[str, ...] = ()
    arms: dict[str, tuple[str, ...]] = Field(default_factory=lambda: {"baseline": tuple[str, ...]()})
    baseline: str = "baseline"
    workload: WorkloadSpec = WorkloadSpec()
    workloads: tuple[WorkloadSpec, ...] = Field(
        (), description="several workloads on the same arms, each judged on its own (instead of workload)"
    )
    repeats: int = Field(3, gt=0, le=MAX_REPEATS)
    adaptive: bool = Field(False, description="set by `repeats: auto`: only undecided arms get more launches")
    max_repeats: int = Field(
        10, ge=3, le=MAX_REPEATS, description="repeats: auto — at most this many launches per arm"
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="repeats: auto — add no launch after this",
    )
    alpha: float = Field(
        0.05,
        gt=0,
        le=0.2,
        allow_inf_nan=False,
        description="the chance of any false faster/slower verdict in the run's family (with repeats: auto, "
        "over all looks)",
    )
    warmup: int = Field(1, ge=0, le=MAX_WARMUP, description="warmup requests per cell, stored but flagged")
    seed: int = Field(0, ge=0, lt=2**63)
    concurrency: int | None = Field(
        None, gt=0, le=MAX_CONCURRENCY, description="requests in flight (default: the suite's)"
    )
    request_timeout: float = Field(300.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    client_processes: int = Field(
        1,
        ge=1,
        le=64,
        description="worker processes that stream the requests (one reads ~80k tok/s on a core); "
        "raise it when CLIENT_BEHIND fires at high concurrency",
    )
    startup_timeout: float = Field(180.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    host: str = "127.0.0.1"
    forward_probe: bool = Field(
        True, description="time target prefills of 1..65 tokens in the baseline arm (verify cost)"
    )
    engine_binary: str | None = None
    env: dict[str, str] = {}
    api_key_env: str | None = Field(
        None, description="name of an environment variable holding the server's API key (bearer token)"
    )
    resources: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Ray executor: per arm (or '*') resources, e.g. num_gpus, 'accelerator_type:H100'",
    )
    tune: TuneSpec | None = Field(None, description="`specbench tune`: search space, workloads, budget")
    slo: SLOSpec | None = Field(None, description="goodput: bounds on ttft_ms, tpot_ms, e2e_ms per request")

    @model_validator(mode="before")
    @classmethod
    def _auto_repeats(cls, data: Any) -> Any:
        """``repeats: auto`` plans ``max_repeats`` launches per arm and lets specbench.run.adaptive
        stop each arm as soon as its verdict is settled."""
        if isinstance(data, dict) and data.get("repeats") == "auto":
            return {**data, "repeats": data.get("max_repeats", 10), "adaptive": True}
        return data

    @model_validator(mode="after")
    def _adaptive_needs_three(self) -> Matrix:
        if self.adaptive and self.repeats < 3:
            raise ValueError("adaptive repeats need at least 3 launches per arm (a verdict's minimum)")
        return self

    @field_validator("arms")
    @classmethod
    def _some_arms(cls, arms: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if not arms:
            raise ValueError("at least one arm is needed")
        for name, args in arms.items():
            check_arm_name(name)
            no_nul(args, f"{name}: ")
        return arms

    @field_validator("common_args")
    @classmethod
    def _args_pass_exec(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        no_nul(args, "")
        return args

    @field_validator("model", "engine_binary")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        return path_ok(value)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        """What execve accepts: a name without '=' or NUL (the kernel splits NAME=VALUE at the
        first '='), a value without NUL."""
        return check_env(env)

    @model_validator(mode="after")
    def _baseline_is_an_arm(self) -> Matrix:
        if not ENGINES[self.engine].launches:
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

    @model_validator(mode="after")
    def _workloads_have_names(self) -> Matrix:
        if self.workloads and "workload" in self.model_fields_set:
            raise ValueError("workload and workloads: give one of them (workloads is a list of workloads)")
        labels = [w.label for w in self.workloads]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"workloads: {twice} named more than once: give each a distinct name")
        return self

    @property
    def all_workloads(self) -> tuple[WorkloadSpec, ...]:
        """The workloads every arm runs, in order: ``workloads``, or the single ``workload``."""
        return self.workloads or (self.workload,)

    def arm_args(self, arm: str) -> list[str]:
        return [*self.common_args, *self.arms[arm]]


class RequestSpec(_Frozen):
    """One request as sent to every arm and repeat: matched arms get identical requests."""

    prompt_id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    max_tokens: int
    temperature: float
    seed: int
    ignore_eos: bool = False
    workload: str | None = None  # None: the cell's (runs of one workload before names existed)
    phase: str = "main"
    concurrency: int | None = None  # None: the cell's
    request_rate: float | None = None  # open loop: requests per second of its phase (None: closed loop)
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


class Cell(_Frozen):
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
) -> list[Cell]:
    """Cells in planned order: arms interleaved ABBA across repeats, so slow drift
    (thermal, background load) hits every arm alike instead of the last one. The runner then
    counterbalances each pair of rounds in a seeded order of the arms (run/order.py)."""
    arms = list(matrix.arms)
    cells = []
    for repeat in range(matrix.repeats):
        order = arms if repeat % 2 == 0 else arms[::-1]
        for arm in order:
            cells.append(
                Cell(
                    arm=arm,
                    repeat=repeat,
                    workload="+".join(w.label for w in matrix.all_workloads),
                    args=tuple(matrix.arm_args(arm)),
                    requests=requests,
                    warmup=warmup,
                    concurrency=concurrency,
                )
            )
    return cells
