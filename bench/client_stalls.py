"""Where specbench's client reads two chunks as one (not a test: no thresholds). A diagnostic
beside bench/client_schedule.py: one run of specbench's client against the precise C server
(the same pinning: the server on the first CPU, the client on the second), traced, then every
burst of chunks read two in one set against what the client's event loop was doing.

A chunk is read together with the next when its socket was not read between the server's two
writes: the kernel then keeps one receive time for both. The loop polls its sockets once a turn
and, while streams are open, between callbacks (client/readfirst.py); so a burst needs a stretch
without a poll longer than a tick, or a pause of the whole process. The tracer records, in the
client's process, every poll, every callback over 0.1 ms (wall time and the thread's own CPU:
equal where the thread ran, or where the hypervisor took the CPU and the guest charged it to the
thread), and every garbage collection over 0.2 ms; the report prints per burst its size, when in
the streams it fell (the first or last 32 tokens are where 64 streams end and start together),
the longest stretch without a poll around it and the callbacks and collections in that stretch.

    .venv/bin/python bench/client_stalls.py [--c 64] [--requests-per-c 20] [--tokens 256]
        [--interval-ms 2] [--bursts 20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from client_overhead import free_port, pinned
from client_schedule import add_requests_per_c, compiled, gaps, merged

HERE = Path(__file__).resolve().parent
BURST_NS = 3_000_000  # merged reads closer than this are one burst
SLOW_NS = 100_000  # callbacks kept by the tracer
POLL_GAP_NS = 1_000_000  # stretches without a poll kept by the tracer


def trace(out: Path, worker: list[str]) -> None:
    """Run ``client_overhead.py --worker`` in this process with the loop traced; the trace is
    written to ``out`` at exit."""
    import asyncio.events
    import atexit
    import gc
    import selectors
    import time

    perf, cpu = time.perf_counter_ns, time.thread_time_ns
    slow: list[tuple[int, int, int, str]] = []
    polls: list[tuple[int, int]] = []
    collections: list[tuple[int, int, int]] = []
    run = asyncio.events.Handle._run

    def name_of(handle: Any) -> str:
        callback = handle._callback
        owner = getattr(callback, "__self__", None)
        if owner is not None and hasattr(owner, "get_coro"):  # a task's step
            return "task " + getattr(owner.get_coro(), "__qualname__", "?")
        return getattr(callback, "__qualname__", None) or repr(callback)[:60]

    def traced_run(handle: Any) -> None:
        t, c = perf(), cpu()
        run(handle)
        if (d := perf() - t) > SLOW_NS:
            slow.append((t, d, cpu() - c, name_of(handle)))

    select = selectors.EpollSelector.select

    def traced_select(self: Any, timeout: float | None = None) -> Any:
        t = perf()
        events = select(self, timeout)
        polls.append((t, perf()))
        return events

    started = [0]

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = perf()
        elif (d := perf() - started[0]) > 2 * SLOW_NS:
            collections.append((started[0], d, info["generation"]))

    def dump() -> None:
        stretches = [(a1, b0) for (_, a1), (b0, _) in itertools.pairwise(polls) if b0 - a1 > POLL_GAP_NS]
        out.write_text(json.dumps({"stretches": stretches, "slow": slow, "collections": collections}))

    asyncio.events.Handle._run = traced_run  # type: ignore[method-assign]
    selectors.EpollSelector.select = traced_select  # type: ignore[method-assign]
    gc.callbacks.append(collected)
    atexit.register(dump)
    sys.argv = [str(HERE / "client_overhead.py"), "--worker", *worker]
    runpy.run_path(sys.argv[0], run_name="__main__")


def bursts(per_request: list[tuple[list[float], list[float], list[int]]]) -> list[dict[str, Any]]:
    """Merged reads (client_schedule.merged), grouped."""
    found = []
    for client, server, sent in per_request:
        for k, (c, s) in enumerate(zip(client, server, strict=True)):
            if merged(c, s):
                found.append((sent[k] - int(s * 1e6), sent[k], k, len(client)))
    found.sort()
    out: list[dict[str, Any]] = []
    for first, second, k, n in found:
        if out and first - out[-1]["end"] < BURST_NS:
            burst = out[-1]
            burst["end"], burst["n"] = max(burst["end"], second), burst["n"] + 1
        else:
            burst = {"start": first, "end": second, "n": 1, "edge": 0}
            out.append(burst)
        burst["edge"] += k < 32 or k >= n - 32
    return out


def report(found: list[dict[str, Any]], tr: dict[str, Any], total: int, limit: int) -> None:
    n_merged = sum(b["n"] for b in found)
    share = 100 * n_merged / max(1, total)
    print(f"{n_merged} of {total} chunk pairs read two in one ({share:.2f} %), in {len(found)} bursts")
    t0 = found[0]["start"] if found else 0
    for b in sorted(found, key=lambda b: -b["n"])[:limit]:
        lo, hi = b["start"] - 2_000_000, b["end"]
        near = [(a, z) for a, z in tr["stretches"] if a < hi and z > lo]
        stretch = max((z - a for a, z in near), default=0) / 1e6
        calls = [
            f"{name} {d / 1e6:.2f} ms (cpu {c / 1e6:.2f})"
            for t, d, c, name in tr["slow"]
            if lo - 1_000_000 < t < hi
        ]
        gcs = [f"gen{g} {d / 1e6:.2f} ms" for t, d, g in tr["collections"] if lo - 1_000_000 < t < hi]
        print(
            f"  at {(b['start'] - t0) / 1e6:7.1f} ms: {b['n']:3d} pairs ({b['edge']} in a stream's first or "
            f"last 32 tokens); longest stretch without a poll {stretch:.2f} ms; callbacks "
            f"{calls[-4:] or 'none over 0.1 ms'}; collections {gcs or 'none'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--c", type=int, default=64)
    add_requests_per_c(parser)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--bursts", type=int, default=20, help="the largest bursts printed")
    parser.add_argument("--trace", nargs=7, help=argparse.SUPPRESS)  # OUT and the worker's 6 arguments
    args = parser.parse_args()
    if args.trace:
        trace(Path(args.trace[0]), args.trace[1:])
        return
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus, client_cpus = ({cpus[0]}, {cpus[1]}) if len(cpus) >= 2 else (None, None)
    port = free_port()
    argv = [str(compiled("server")), str(port), str(int(args.interval_ms * 1000))]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=pinned(server_cpus))
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        with tempfile.TemporaryDirectory() as tmp:
            out, traced = Path(tmp), Path(tmp) / "trace.json"
            n = max(4, args.requests_per_c * args.c)
            worker = [f"http://127.0.0.1:{port}", str(args.c), str(n), str(args.tokens), str(out), "aiohttp"]
            subprocess.run(
                [sys.executable, __file__, "--trace", str(traced), *worker],
                check=True,
                preexec_fn=pinned(client_cpus),
            )
            per_request = gaps(out / "records.jsonl")
            total = sum(len(c) for c, _, _ in per_request)
            report(bursts(per_request), json.loads(traced.read_text()), total, args.bursts)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
