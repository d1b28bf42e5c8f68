"""Named workloads: which prompts, how long in and out, how many requests in flight.

Speculative decoding's value depends on the workload — prompt entropy, output length, context
length, concurrency and cache hits flip the sign (docs/mistakes.md, mistakes 5–7, 9, 11) — so a matrix
names a suite. Matrix ``workload`` fields override a suite's defaults; ``scale`` multiplies all
token lengths so every suite runs on the CPU lab models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.matrix.config import Matrix, RequestSpec, WorkloadSpec
from specbench.matrix.files import matrix_path
from specbench.workloads import agent
from specbench.workloads.prompts import Prompt, load_bundled, load_prompt_file, select

MIN_TOKENS = 8
WARMUP_MESSAGES = ({"role": "user", "content": "Warm-up request: reply with a short greeting."},)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    prompts: int
    input_tokens: int | None  # None: the prompts as written
    max_tokens: int
    concurrency: int
    builder: str = "plain"
    lengths: tuple[int, ...] = ()
    levels: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    # The measure that decides the answer (analysis/measures.py): a batch-1 suite is judged by
    # per-request decode (with its wall-clock guard), a concurrent one by throughput (with a
    # TTFT p99 guard), a rate sweep by goodput. The matrix's ``objective`` overrides it.
    objective: str = "decode"


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("single", "batch 1, ~512 in / 512 out, prompts spanning all categories", 10, 512, 512, 1),
        Suite(
            "prefill",
            "~8k in / 256 out, 4 concurrent: where prefill dominates",
            8,
            8192,
            256,
            4,
            objective="throughput",
        ),
        Suite(
            "concurrent",
            "~2k in / 512 out, 16 concurrent: where speculation can flip sign",
            16,
            2048,
            512,
            16,
            objective="throughput",
        ),
        Suite("chat", "~2k in / 256 out, 2 concurrent", 10, 2048, 256, 2, objective="throughput"),
        Suite(
            "agent",
            "system prompt + 8 tools + long history (~16k), tool calls and prose",
            6,
            16384,
            256,
            1,
            builder="agent",
        ),
        Suite(
            "cache-reuse",
            "identical bodies vs a stable ~4k prefix with a varying last turn",
            6,
            4096,
            128,
            1,
            builder="cache",
        ),
        Suite(
            "length-sweep",
            "the same prompts at max_tokens 100/500/1000/2000 (ignore_eos)",
            4,
            512,
            2000,
            1,
            builder="lengths",
            lengths=(100, 500, 1000, 2000),
        ),
        Suite(
            "concurrency-sweep",
            "1, 2, 4, 8, 16 requests in flight",
            8,
            512,
            256,
            1,
            builder="levels",
            levels=(1, 2, 4, 8, 16),
            objective="throughput",
        ),
        Suite(
            "rate-sweep",
            "open loop at 1, 2, 4, 8 requests/s, up to 32 in flight: where speculation stops paying",
            8,
            512,
            256,
            32,
            builder="rates",
            rates=(1.0, 2.0, 4.0, 8.0),
            objective="goodput",
        ),
        Suite("natural", "bundled prompts as written, 512 out, batch 1", 10, None, 512, 1),
        Suite(
            "scenarios",
            "the four operating points field reports use, one phase each: single (batch 1, ~512 / 512), "
            "prefill (~8k / 256, 4 in flight), concurrent (~2k / 512, 16), chat (~2k / 256, 2)",
            4,
            512,
            512,
            1,
            builder="scenarios",
        ),
    )
}

#: The scenarios suite's phases, each run and judged as its own operating point with the shape
#: (input tokens, output tokens, in flight) and the objective of the suite it is named after.
SCENARIOS = ("single", "prefill", "concurrent", "chat")


@dataclass(frozen=True)
class Context:
    """A suite with the matrix's overrides applied."""

    suite: Suite
    spec: WorkloadSpec
    seed: int
    prompts: list[Prompt]

    def tokens(self, value: int) -> int:
        return max(MIN_TOKENS, round(value * self.spec.scale))

    @property
    def max_tokens(self) -> int:
        return self.spec.max_tokens or self.tokens(self.suite.max_tokens)

    @property
    def input_tokens(self) -> int | None:
        raw = self.spec.input_tokens or self.suite.input_tokens
        return None if raw is None else (self.spec.input_tokens or self.tokens(raw))

    def request(self, pid: str, category: str, messages: list[dict[str, Any]], **kw: Any) -> RequestSpec:
        fields: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.spec.temperature,
            "seed": self.seed,
            "ignore_eos": bool(self.spec.ignore_eos),
            "target_tokens": self.input_tokens,
            "extra": dict(self.spec.extra_body),
            **kw,
        }
        return RequestSpec(prompt_id=pid, category=category, messages=tuple(messages), **fields)


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ConfigError(f"workload.suite: unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    return SUITES[name]


def _plain(ctx: Context) -> list[RequestSpec]:
    return [ctx.request(p.id, p.category, p.as_messages()) for p in ctx.prompts]


def _agent(ctx: Context) -> list[RequestSpec]:
    asks = [agent.ASKS[i % len(agent.ASKS)] for i in range(len(ctx.prompts))]
    return [
        ctx.request(f"agent-{i:02d}-{kind}", f"agent-{kind}", agent.agent_messages(ask), tools=agent.TOOLS)
        for i, (kind, ask) in enumerate(asks)
    ]


def _cache(ctx: Context) -> list[RequestSpec]:
    """Phase 'identical': one body sent n times. Phase 'prefix': one long prefix, varying last turn."""
    body = ctx.prompts[0].as_messages()
    same = [
        ctx.request(f"same-{i:02d}", "cache-identical", body, phase="identical", fill_key="same")
        for i in range(len(ctx.prompts))
    ]
    prefix = [
        ctx.request(
            f"prefix-{i:02d}",
            "cache-prefix",
            [{"role": "system", "content": "Reference document:\n{{FILL}}"}, *p.as_messages()],
            phase="prefix",
            fill_key="prefix",  # one document shared by every request: a stable, cacheable prefix
        )
        for i, p in enumerate(ctx.prompts)
    ]
    return same + prefix


def _lengths(ctx: Context) -> list[RequestSpec]:
    """Each length gets its own prompts: re-sending one prompt at several lengths in one launch
    serves its prefill from the cache and lets an n-gram drafter learn the earlier outputs, so
    the sweep would compare a cold request with warm ones. Prompts are reused only when the pool
    is too small (each reuse still gets its own filler: a distinct prefix per length)."""
    lengths = ctx.spec.lengths or tuple(ctx.tokens(n) for n in ctx.suite.lengths)
    per = max(1, len(ctx.prompts) // max(len(lengths), 1))
    out = []
    for j, n in enumerate(lengths):
        block = [ctx.prompts[(j * per + i) % len(ctx.prompts)] for i in range(per)] if ctx.prompts else []
        out += [
            ctx.request(
                f"{p.id}@len{n}", p.category, p.as_messages(), max_tokens=n, ignore_eos=True, phase=f"len{n}"
            )
            for p in block
        ]
    return out


def _levels(ctx: Context) -> list[RequestSpec]:
    levels = ctx.spec.levels or ctx.suite.levels
    return (
        [
            ctx.request(f"{p.id}@c{c}", p.category, p.as_messages(), concurrency=c, phase=f"c{c}")
            for c in levels
            for p in (ctx.prompts * (1 + c // max(len(ctx.prompts), 1)))[: max(len(ctx.prompts), c)]
        ]
        if levels
        else []
    )


def _scenarios(ctx: Context) -> list[RequestSpec]:
    """One phase per scenario (:data:`SCENARIOS`), in order, each with its suite's input and
    output lengths (times ``scale``) and concurrency, at least as many requests as it keeps in
    flight, and prompt ids of its own (no prefix cached from another scenario). The output length
    is forced (ignore_eos): a scenario's shape is its point."""
    out = []
    for name in SCENARIOS:
        s = SUITES[name]
        flight = s.concurrency
        pool = (ctx.prompts * (1 + flight // max(len(ctx.prompts), 1)))[: max(len(ctx.prompts), flight)]
        shape: dict[str, Any] = {  # the matrix's max_tokens / input_tokens override every phase's
            "concurrency": flight,
            "max_tokens": ctx.spec.max_tokens or ctx.tokens(s.max_tokens),
            "target_tokens": ctx.spec.input_tokens or ctx.tokens(s.input_tokens or 512),
            "ignore_eos": True,
        }
        out += [ctx.request(f"{p.id}@{name}", p.category, p.as_messages(), phase=name, **shape) for p in pool]
    return out


def _rates(ctx: Context) -> list[RequestSpec]:
    """One open-loop phase per request rate, lowest first, each sending the prompts on its own
    schedule. Ids carry the rate, so each request gets its own filler (no prefix cached from a
    lower rate) and pairs across arms only with itself."""
    rates = ctx.spec.rates or ctx.suite.rates
    return [
        ctx.request(f"{p.id}@r{r:g}", p.category, p.as_messages(), request_rate=r, phase=f"r{r:g}")
        for r in rates
        for p in ctx.prompts
    ]


BUILDERS: dict[str, Callable[[Context], list[RequestSpec]]] = {
    "plain": _plain,
    "agent": _agent,
    "cache": _cache,
    "lengths": _lengths,
    "levels": _levels,
    "rates": _rates,
    "scenarios": _scenarios,
}


def _prompts(spec: WorkloadSpec, suite: Suite, seed: int, base: Path) -> list[Prompt]:
    n = spec.prompts or suite.prompts
    if suite.builder == "lengths":  # n distinct prompts per length (see _lengths)
        n *= len(spec.lengths or suite.lengths) or 1
    if spec.prompt_file:
        pool = load_prompt_file(matrix_path(base, spec.prompt_file))
    else:
        pool = _fitting(load_bundled(), _input_target(spec, suite))
    return select(pool, min(n, len(pool)), seed, spec.categories)


def _input_target(spec: WorkloadSpec, suite: Suite) -> int | None:
    raw = spec.input_tokens or suite.input_tokens
    return None if raw is None else (spec.input_tokens or max(MIN_TOKENS, round(raw * spec.scale)))


def _fitting(pool: list[Prompt], target: int | None) -> list[Prompt]:
    """Bundled prompts short enough to be filled up to ``target``: a longer one cannot be fitted
    and would stop the run (length.check_fit). A user's own file is never filtered: its prompts
    are the workload, and a misfit there is an error naming the prompt."""
    if target is None:
        return pool
    kept = [p for p in pool if _estimate(p) <= FITS_SHARE * target]
    if not kept:
        raise ConfigError(
            f"workload.input_tokens: {target} tokens is shorter than every bundled prompt; "
            "raise input_tokens or scale"
        )
    return kept


FITS_SHARE = 0.8  # a bundled prompt's estimated length must leave this much room for the filler


def _estimate(prompt: Prompt) -> float:
    return sum(len(text) for _, text in prompt.messages) / 4.0 + 4 * len(prompt.messages)


def build_requests(
    matrix: Matrix, base: Path
) -> tuple[tuple[RequestSpec, ...], tuple[RequestSpec, ...], int]:
    """(requests, warm-up requests, default concurrency); identical for every arm. Several
    workloads run one after the other in each cell, their requests named ``<workload>/<prompt>``."""
    several = len(matrix.all_workloads) > 1
    requests: list[RequestSpec] = []
    for i, spec in enumerate(matrix.all_workloads):
        suite = _suite(spec, f"workloads.{i}" if several else "workload")
        ctx = Context(suite, spec, matrix.seed, _prompts(spec, suite, matrix.seed, base))
        own = _unique(BUILDERS[suite.builder](ctx))
        concurrency = matrix.concurrency or suite.concurrency
        requests += [_tagged(_rated(req, spec), spec.label, concurrency, several) for req in own]
    first = matrix.all_workloads[0]
    # Warm-ups use their own prompt: repeating a measured prompt would warm its prompt cache.
    warmup = tuple(
        RequestSpec(
            prompt_id=f"warmup-{i}",
            category="warmup",
            messages=WARMUP_MESSAGES,
            max_tokens=min(32, Context(get_suite(first.suite), first, matrix.seed, []).max_tokens),
            temperature=first.temperature,
            seed=matrix.seed,
        )
        for i in range(matrix.warmup)
    )
    return tuple(requests), warmup, matrix.concurrency or get_suite(first.suite).concurrency


def _suite(spec: WorkloadSpec, where: str) -> Suite:
    try:
        return get_suite(spec.suite)
    except ConfigError as exc:  # name the list entry, not "workload", when there are several
        raise ConfigError(where + str(exc).removeprefix("workload")) from None


def _tagged(req: RequestSpec, workload: str, concurrency: int, several: bool) -> RequestSpec:
    """``req`` marked with its workload. With several workloads its id, filler key and phase are
    prefixed too: ids key records (resume, pairing), fillers must not be shared across workloads,
    and each workload runs as its own phase at its own concurrency."""
    if not several:
        return req.model_copy(update={"workload": workload})
    return req.model_copy(
        update={
            "workload": workload,
            "prompt_id": f"{workload}/{req.prompt_id}",
            "fill_key": f"{workload}/{req.fill_key}" if req.fill_key else None,
            "phase": f"{workload}/{req.phase}",
            "concurrency": req.concurrency or concurrency,
        }
    )


def _rated(req: RequestSpec, spec: WorkloadSpec) -> RequestSpec:
    """The workload's ``request_rate`` on each request its builder did not give a rate: the runner
    reads the open-loop rate per phase from its requests."""
    if req.request_rate is not None or spec.request_rate is None:
        return req
    return req.model_copy(update={"request_rate": spec.request_rate})


def _unique(requests: list[RequestSpec]) -> tuple[RequestSpec, ...]:
    """Prompt ids must be unique: they key records for resume and pairing."""
    seen: dict[str, int] = {}
    out = []
    for req in requests:
        n = seen.get(req.prompt_id, 0)
        seen[req.prompt_id] = n + 1
        out.append(req if n == 0 else req.model_copy(update={"prompt_id": f"{req.prompt_id}#{n}"}))
    return tuple(out)
