"""Named workloads: which prompts, how long the answers, how many requests in flight.

Speculative decoding's value depends on the workload (findings.md pitfalls 5–7, 9), so a
matrix names a suite rather than a single prompt. Matrix fields override a suite's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.config import Matrix, RequestSpec, WorkloadSpec
from specbench.errors import ConfigError
from specbench.workloads.prompts import Prompt, load_bundled, load_prompt_file, select


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    prompts: int
    max_tokens: int
    concurrency: int


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("single", "batch 1, one request at a time, prompts spanning all categories", 10, 512, 1),
        Suite("chat", "chat-style requests, 2 in flight", 10, 256, 2),
        Suite("concurrent", "16 requests in flight: where speculation can flip sign", 16, 512, 16),
    )
}

WARMUP_MESSAGES = ({"role": "user", "content": "Warm-up request: reply with a short greeting."},)


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ConfigError(f"workload.suite: unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    return SUITES[name]


def _prompts(spec: WorkloadSpec, suite: Suite, seed: int, base: Path) -> list[Prompt]:
    n = spec.prompts or suite.prompts
    if spec.prompt_file:
        path = Path(spec.prompt_file)
        pool = load_prompt_file(path if path.is_absolute() else base / path)
    else:
        pool = load_bundled()
    return select(pool, min(n, len(pool)), seed, spec.categories)


def build_requests(
    matrix: Matrix, base: Path
) -> tuple[tuple[RequestSpec, ...], tuple[RequestSpec, ...], int]:
    """(requests, warmup requests, concurrency) for a matrix; identical for every arm."""
    spec = matrix.workload
    suite = get_suite(spec.suite)
    max_tokens = spec.max_tokens or suite.max_tokens
    requests = tuple(
        RequestSpec(
            prompt_id=p.id,
            category=p.category,
            messages=tuple(p.as_messages()),
            max_tokens=max_tokens,
            temperature=spec.temperature,
            seed=matrix.seed,
            ignore_eos=spec.ignore_eos,
        )
        for p in _prompts(spec, suite, matrix.seed, base)
    )
    # Warm-ups use their own prompt: repeating a measured prompt would warm its prompt cache.
    warmup = tuple(
        RequestSpec(
            prompt_id=f"warmup-{i}",
            category="warmup",
            messages=WARMUP_MESSAGES,
            max_tokens=min(32, max_tokens),
            temperature=spec.temperature,
            seed=matrix.seed,
        )
        for i in range(matrix.warmup)
    )
    return requests, warmup, matrix.concurrency or suite.concurrency
