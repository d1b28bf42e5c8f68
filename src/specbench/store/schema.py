"""The shape of a run directory's lines: its version, typed records, cells, manifests and chunks.

Every ``records.jsonl`` and ``cells.jsonl`` line is stamped with :data:`SCHEMA_VERSION` by
:func:`stamped` (the one place that happens; :class:`specbench.store.rundir.RunStore` writes the lines).
The lines are TypedDicts, not classes, so the JSON on disk keeps exactly its shape: a reader
of an older run directory sees the same keys it always did, and a key a version added is
optional; readers take a line as a :class:`specbench.store.record.Record`, read once. A chunk
is a :class:`Chunk` (a NamedTuple, so it is still the JSON list it always was); read chunks with
:func:`chunks`, which names the fields of rows of any version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

#: Version of the lines written to a run directory; bump it on any incompatible change and keep
#: a reader for the old shape. History (as pyperf keeps its format's):
#:
#: * 1: records, cells and manifest as first published; chunk rows
#:   ``[t_ns, content, reasoning, tool_calls, finish_reason]``.
#: * 2: each chunk row gains a sixth field, the server's running count of generated tokens
#:   (None when the server sends none). :func:`chunks` reads version-1 rows with ``tokens=None``.
SCHEMA_VERSION = 2


class Chunk(NamedTuple):
    """One streamed choice delta, stamped when the read that completed its SSE event arrived."""

    t_ns: float  # ns since the request was sent (an imported row may hold NaN: time unknown)
    content: str | None
    reasoning: str | None  # ``reasoning_content`` (llama.cpp, SGLang) or ``reasoning`` (vLLM)
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None
    tokens: int | None = None  # server's running generated-token count (schema 2); None: not sent

    @property
    def carries_token(self) -> bool:
        """Generated text of any kind: llama.cpp's first role-only chunk (all None) is not a token."""
        return bool(self.content or self.reasoning or self.tool_calls)


def chunk_rows(rows: Sequence[Any] | None) -> list[Chunk]:
    """Chunk rows as :class:`Chunk` (rows of 5 fields are schema 1: ``tokens=None``)."""
    return [c if type(c) is Chunk else Chunk(*c) for c in rows or ()]


def chunks(rec: RequestRecord | Mapping[str, Any]) -> list[Chunk]:
    """A record line's chunk rows as :class:`Chunk`."""
    return chunk_rows(rec.get("chunks"))


class RequestRecord(TypedDict, total=False):
    """One ``records.jsonl`` line: a request as sent and everything its response streamed.

    Keys in the first group are always present in a native record (drive.CellDriver._one); the
    response keys come from :func:`specbench.client.stream.stream_chat`; the rest only where noted."""

    schema_version: int
    arm: str
    repeat: int
    workload: str
    phase: str
    prompt_id: str
    category: str
    warmup: bool
    seq: int
    started_at: str | None
    wall_start: float | None
    concurrency: int
    request: dict[str, Any]  # the request's echo (config.RequestSpec.echo)
    # response (client/stream.py)
    t_headers_ns: int | None
    t_end_ns: int | None
    t_done_ns: int
    chunks: list[Chunk]
    usage: dict[str, Any]
    timings: dict[str, Any]  # llama.cpp's own timings and draft counts
    metrics: dict[str, Any]  # vLLM's per-request metrics
    system_fingerprint: str
    model: str
    retried: str | dict[str, Any]
    error: dict[str, Any] | str | None
    # open-loop arrivals (workloads/arrivals.py)
    arrival: dict[str, Any]
    scheduled_s: float
    lateness_ms: float
    cap_wait_ms: float
    # client worker processes (client/pool.py): which one streamed it, and the hand-off's delay
    client_process: int
    dispatch_us: float
    # Ray executor and load generator
    node: str | None
    task_attempt: int
    worker: int | None
    load_index: int
    clock_offset_s: float | None
    wall_start_driver: float | None
    # merged (report/merge.py) and imported (importer/) runs
    machine: str
    source_repeat: int
    imported: dict[str, float]
    source: dict[str, Any]


class CellInfo(TypedDict, total=False):
    """One ``cells.jsonl`` line: a served (arm, repeat) cell, or a Ray cell that was lost."""

    schema_version: int
    arm: str
    repeat: int
    attempt: int | None
    started_at: str
    ended_at: str
    base_url: str
    pid: int | None
    server: dict[str, Any]  # the engine's self-description (/props, /v1/models, ...)
    metrics_before: dict[str, Any]
    metrics_after: dict[str, Any]
    log_window: str
    log_lines_expected: int
    log_lines_found: int
    log_lines: list[str]
    client_lag: dict[str, Any]
    machine_load: dict[str, Any]
    alive_at_end: bool
    hung: str
    forward_probe: dict[str, Any]
    spec_probe: dict[str, Any]  # per-request speculative settings honoured? (engines/specprobe.py)
    rendered_prompts: list[dict[str, Any]]  # one request per category as the server templated it
    model_files: list[dict[str, Any]]  # the model files the launch served (run/servedfiles.py)
    # Ray executor
    lost: bool
    error: str
    executor: str
    task_attempt: int
    node: str | None
    node_id: str | None
    requested_resources: dict[str, Any]
    node_resources: dict[str, Any]
    node_labels: dict[str, Any]
    hardware: dict[str, Any]
    machine: str
    source_repeat: int


class Manifest(TypedDict, total=False):
    """``manifest.json``: the resolved matrix, versions, times and every arm's status."""

    schema_version: int
    specbench_version: str
    host: str
    started_at: str
    finished_at: str | None
    resumed_at: str
    matrix: dict[str, Any]
    arms: dict[str, dict[str, Any]]  # arm -> status, command, env, error, log_tail, ...
    attach: Any
    repairs: list[str]
    model_changes: list[dict[str, Any]]  # model files that changed under the run (run/servedfiles.py)
    executor: dict[str, Any]
    distributed_load: list[dict[str, Any]]
    sources: list[dict[str, Any]]


def record_line(record: RequestRecord) -> str:
    """One record as its line in records.jsonl (what :meth:`RunStore.append_lines` takes)."""
    return json.dumps(stamped(record), default=str) + "\n"


def stamped(row: RequestRecord | CellInfo | dict[str, Any]) -> dict[str, Any]:
    """The line as written: this version first, unless the row already says which version it
    is (a merged run keeps each source line's own)."""
    return {"schema_version": SCHEMA_VERSION, **row}
