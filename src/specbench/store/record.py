"""A ``records.jsonl`` line as a type: :class:`Record`, read once, with the server's own counts.

The line on disk stays what it always was (:class:`specbench.store.schema.RequestRecord`: raw and
versioned, engine fields as the server sent them); a reader turns it into a :class:`Record` once,
as pyperf's results load themselves, and reads attributes from then on. What a server says of
one request in its own vocabulary (llama.cpp ``timings``, vLLM ``metrics``) arrives as a
:class:`ServerCounts` in engine-neutral terms: the engine that knows the fields fills it
(:meth:`specbench.engines.base.Engine.request_counts`; :func:`specbench.engines.read_record` reads
a line with it), so no reader above the engines names an engine's field.

Values are kept as read, not coerced: a report of an old or hand-edited run directory must read
the same as it always did (the identity columns of the request frame are these values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Any

from specbench.store.schema import SCHEMA_VERSION, Chunk, chunk_rows


@dataclass(frozen=True, slots=True)
class ServerCounts:
    """What the server said of one request, in engine-neutral terms; None: it did not say."""

    drafted: float | None = None  # draft tokens proposed
    accepted: float | None = None  # of them, accepted by the target
    rounds: float | None = None  # verification steps (vLLM ``num_spec_steps``)
    mean_acceptance_length: float | None = None  # tokens per verification step, as the server says
    output_tokens: float | None = None  # generated tokens the server counted (llama.cpp ``predicted_n``)
    prompt_processed: float | None = None  # prompt tokens prefilled, cache hits excluded
    cached_tokens: float | None = None  # prompt tokens served from the prompt cache
    prefill_ms: float | None = None  # slot start to first sampled token (queueing excluded)
    decode_ms: float | None = None  # first to last generated token, on the server
    decode_tok_s: float | None = None  # the server's own decode rate

    def filled_from(self, other: ServerCounts) -> ServerCounts:
        """These counts, each one this says nothing of taken from ``other`` (a record holding
        two engines' fields: the first engine's counts win, as they always did)."""
        missing = {f.name: getattr(other, f.name) for f in fields(self) if getattr(self, f.name) is None}
        return replace(self, **{k: v for k, v in missing.items() if v is not None})


NO_COUNTS = ServerCounts()


def number(value: Any) -> float | None:
    """A count or time a server sent, as a float; None when it sent none (or no number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Record:
    """One request as a run directory holds it: its identity, what was sent, what streamed back.

    ``line`` is the line as read, for the writers that copy it on (a merge, a resume) and for
    fields no reader has a name for; readers use the attributes. ``memo`` is None on a stored
    record; :meth:`measuring` gives a copy with one, where the per-request metrics keep
    what they derived once (the token chunks, the gaps) for the length of one measuring pass."""

    arm: str
    prompt_id: str
    repeat: int
    schema_version: int | None = SCHEMA_VERSION  # None: a line from before lines were stamped
    workload: str | None = None
    phase: str | None = None
    category: str | None = None
    warmup: bool | None = None
    seq: int | None = None
    concurrency: int | None = None
    request: Mapping[str, Any] | None = None  # the request's echo (max_tokens, temperature, ...)
    t_end_ns: float | None = None
    wall_start: float | None = None
    chunks: Sequence[Any] | None = None  # JSON rows, Chunk rows, or a loaded run's packed arrays
    usage: Mapping[str, Any] | None = None
    error: Any = None  # None: the request succeeded
    imported: Mapping[str, Any] | None = None  # metric values an importer carried over
    machine: str | None = None  # a merged run's source machine
    # open-loop arrivals (workloads/arrivals.py)
    arrival: Mapping[str, Any] | None = None
    lateness_ms: float | None = None
    cap_wait_ms: float | None = None
    counts: ServerCounts = NO_COUNTS
    line: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    memo: dict[str, Any] | None = field(default=None, repr=False, compare=False, kw_only=True)

    @classmethod
    def read(cls, line: Mapping[str, Any], counts: ServerCounts | None = None) -> Record:
        """The record a line holds (a line as :meth:`specbench.store.rundir.RunStore.iter_records`
        reads it, or a record as the client made it), with the server's ``counts``."""
        get: Callable[[str], Any] = line.get
        # Positional, in field order: a keyword call costs a third more, per record of a 100k run.
        return cls(
            get("arm"),
            get("prompt_id"),
            get("repeat"),
            get("schema_version"),
            get("workload"),
            get("phase"),
            get("category"),
            get("warmup"),
            get("seq"),
            get("concurrency"),
            get("request"),
            get("t_end_ns"),
            get("wall_start"),
            get("chunks"),
            get("usage"),
            get("error"),
            get("imported"),
            get("machine"),
            get("arrival"),
            get("lateness_ms"),
            get("cap_wait_ms"),
            counts or NO_COUNTS,
            line,
        )

    def measuring(self, memo: dict[str, Any]) -> Record:
        """A copy holding ``memo``, for one pass of the per-request metrics (every field but the
        memo read at once in C: ``dataclasses.replace`` took twice as long, per record of a run)."""
        return Record(*_ALL_BUT_MEMO(self), memo=memo)

    @property
    def measured(self) -> bool:
        """A measured request that succeeded: neither a warm-up nor an error."""
        return self.error is None and not self.warmup

    @property
    def key(self) -> tuple[str, str, int]:
        """(arm, prompt_id, repeat): the request's place in the matrix."""
        return (self.arm, self.prompt_id, self.repeat)

    def chunk_rows(self) -> list[Chunk]:
        """The chunk rows as :class:`Chunk` (rows of 5 fields are schema 1: ``tokens=None``)."""
        return chunk_rows(self.chunks)

    @property
    def max_tokens(self) -> Any:
        """The request's ``max_tokens`` as sent (None where it set none)."""
        return (self.request or {}).get("max_tokens")

    @property
    def temperature(self) -> Any:
        return (self.request or {}).get("temperature")

    @property
    def completion_tokens(self) -> Any:
        """``usage.completion_tokens`` as sent (OpenAI's field; ``...`` when the key is absent)."""
        return (self.usage or {}).get("completion_tokens", ...)

    @property
    def prompt_tokens(self) -> Any:
        return (self.usage or {}).get("prompt_tokens")

    @property
    def usage_cached_tokens(self) -> Any:
        """``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field)."""
        return ((self.usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens")


_ALL_BUT_MEMO = attrgetter(*(f.name for f in fields(Record) if f.name != "memo"))


def as_records(
    rows: Sequence[Record | Mapping[str, Any]], read: Callable[[Mapping[str, Any]], Record] = Record.read
) -> list[Record]:
    """``rows`` as records: a record stays as it is, a line is read by ``read``."""
    return [r if isinstance(r, Record) else read(r) for r in rows]
