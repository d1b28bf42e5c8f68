"""Side-by-side client cost (not a test: no thresholds). Every client drives the same fast local
streaming server (bench/stream_server.py, its own process) at each concurrency, and this prints,
per client and concurrency: client CPU ms per 1000 tokens (the client's process tree's CPU over
the server's load window, first request to last token), achieved tok/s, the per-token timestamp
error (|client gap - true server gap| for each pair of consecutive token chunks, p50/p99; one
definition for every client that keeps per-chunk times, "n/a" for one that does not) and the
ratio to the best peer, then whether specbench met the goals at that concurrency (CPU per token
<= the best peer's, tok/s >= 0.95x the best peer's, timestamp error p99 < 0.1 ms at c <= 64).
Peers: ``vllm bench serve`` (the vLLM venv in the cache), AIPerf and GuideLLM (each installed
into its own venv under ~/.cache/specbench/bench-peers on first use, pinned; see
bench/client_peers.py). Nothing is installed into the project's environment.

    .venv/bin/python bench/client_overhead.py [--c 1 16 64 256] [--tokens 256] [--interval-ms 2]
        [--requests-per-c 4] [--tokens-per-chunk 1] [--no-pin]
        [--clients specbench specbench-poll specbench-procs2 vllm aiperf guidellm]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from client_peers import PEERS, pair_errors, peer_binary, peer_command, peer_errors, stamps

from specbench.transport import fetch_blocking

HERE = Path(__file__).resolve().parent
SAMPLE_S = float(os.environ.get("BENCH_SAMPLE_S", "0.05"))  # load windows are seconds long


# -- the specbench client, as the runner drives it --------------------------------------------
async def specbench_load(url: str, c: int, n: int, tokens: int, out: Path, transport: str) -> None:
    """n requests with at most c in flight, each record appended to a run store, as the runner does."""
    from specbench.client import readstamps
    from specbench.client.pool import StreamerPool, stream_request
    from specbench.client.stream import chat_body, open_streamer
    from specbench.store.recordwriter import RecordWriter
    from specbench.store.rundir import RunStore

    writer = RecordWriter(RunStore(out))
    limit = asyncio.Semaphore(c)
    body = chat_body([{"role": "user", "content": "hi"}], tokens, 0.0, 0, {"ignore_eos": True})

    async def one(i: int, session: Any) -> None:
        async with limit:
            result = await stream_request(session, f"{url}/v1/chat/completions", body, 600)
            record = {"arm": "a", "prompt_id": f"p{i}", "repeat": 0, "warmup": False, **result}
            writer.append(record)

    if transport == "poll":  # stamps at the loop's poll, as on a platform without kernel stamps
        readstamps.KERNEL_STAMPS = False
    session_cm: Any
    if transport.startswith("procs"):  # client_processes: N (client/pool.py)
        session_cm = StreamerPool(int(transport[5:]), 600, c, None)
    else:
        session_cm = open_streamer(600, c)
    async with session_cm as session:
        await asyncio.gather(*(one(i, session) for i in range(n)))
    writer.close()


def gap_errors(records_path: Path) -> list[float]:
    """|client gap - server gap| in ms for every consecutive pair of token chunks."""
    errors: list[float] = []
    for line in records_path.read_text().splitlines():
        chunks = [c for c in json.loads(line)["chunks"] if c[1] and c[1].startswith("@")]
        client = [(b[0] - a[0]) / 1e6 for a, b in itertools.pairwise(chunks)]
        errors += pair_errors(client, [stamps(c[1])[0] for c in chunks])
    return errors


# -- the harness -------------------------------------------------------------------------------
class CpuSampler(threading.Thread):
    """Samples a process tree's CPU seconds every ``SAMPLE_S``, so CPU over any window is
    interpolated. It runs on the server's CPU, and a server held there between its stamp and its
    write counts against every client (two writes then land a fraction of a tick apart, which no
    client reads apart), so a sample reads each process's ``/proc/PID/stat`` (~7 µs) and the tree
    is walked anew every ``TREE_S`` only (psutil's walk: ~0.5 ms on a 2-core VM, which every 50 ms
    put the server's write-gap p99 at 2.7 ms for a 2 ms tick). psutil where there is no /proc."""

    TREE_S = 0.5

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.samples, self.stop = psutil.Process(pid), [], threading.Event()
        self.tree: list[psutil.Process] = [self.proc]
        self.walked = 0.0
        self.procfs = os.path.isdir(f"/proc/{pid}")
        self.tick = os.sysconf("SC_CLK_TCK") if self.procfs else 100

    def cpu(self) -> float:
        now = time.monotonic()
        if now - self.walked >= self.TREE_S:
            self.tree, self.walked = [self.proc, *self.proc.children(recursive=True)], now
        return sum(self._cpu_of(p) for p in self.tree)

    def _cpu_of(self, p: psutil.Process) -> float:
        """One process's CPU seconds; 0 once it has ended (as psutil's walk left it out)."""
        try:
            if not self.procfs:
                t = p.cpu_times()
                return float(t.user + t.system)
            with open(f"/proc/{p.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime
        except (OSError, psutil.Error):
            return 0.0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.perf_counter_ns(), self.cpu()))
            except psutil.Error:
                return
            time.sleep(SAMPLE_S)

    def over(self, start_ns: int, end_ns: int) -> float:
        t = np.array([s[0] for s in self.samples], dtype=float)
        v = np.array([s[1] for s in self.samples])
        return float(np.interp(end_ns, t, v) - np.interp(start_ns, t, v))


def hiccups(cpus: list[int | None]) -> list[str]:
    """How much of a busy thread's time on each of ``cpus`` this machine takes away, all of them
    busy at once as they are under load: the floor under every client's timestamps, printed
    before the table. Measured by this script in one child per CPU (``--hiccups``), so the
    pinning stays there."""
    argv = [sys.executable, __file__, "--hiccups"]
    procs = [
        subprocess.Popen([*argv, "" if cpu is None else str(cpu)], stdout=subprocess.PIPE, text=True)
        for cpu in cpus
    ]
    return [proc.communicate()[0].strip() or f"nothing (exit {proc.returncode})" for proc in procs]


def busy_gaps(seconds: float = 1.0) -> str:
    """Spin for ``seconds`` reading the clock; gaps over 0.2 ms between two reads are time the
    scheduler or another tenant's hypervisor took away."""
    end = time.perf_counter_ns() + int(seconds * 1e9)
    last, gaps = time.perf_counter_ns(), []
    while (now := time.perf_counter_ns()) < end:
        if now - last > 200_000:
            gaps.append(now - last)
        last = now
    share = 100 * sum(gaps) / (seconds * 1e9)
    return f"{share:.0f} % of the time in {len(gaps)} gaps, the longest {max(gaps, default=0) / 1e6:.1f} ms"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(cpus: set[int] | None) -> Any:
    """A ``preexec_fn`` that keeps the child (and what it starts) on ``cpus``; None: unpinned."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def sampled_run(
    label: str, argv: list[str], url: str, cpus: set[int] | None, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], CpuSampler] | None:
    """Reset the server, run the client ``argv`` pinned to ``cpus`` while its CPU is sampled; the
    server's stats and the sampler, or None (and why, printed) when the client failed."""
    fetch_blocking("GET", f"{url}/reset")
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=pinned(cpus), env=env
    )
    sampler = CpuSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        print(f"{label} failed (exit {proc.returncode}): {err.strip()[-600:]}", flush=True)
        return None
    return fetch_blocking("GET", f"{url}/stats").json(), sampler


def measure(name: str, argv: list[str], url: str, out: Path, cpus: set[int] | None) -> dict[str, Any] | None:
    """One client's run: its CPU over the server's load window, tok/s and timestamp errors; None
    (and why, printed) when the client failed."""
    ran = sampled_run(name, argv, url, cpus)
    if ran is None:
        return None
    stats, sampler = ran
    window = (stats["last_ns"] - stats["first_ns"]) / 1e9
    own = name.startswith("specbench") or name == "floor"
    errs = gap_errors(out / "records.jsonl") if own else peer_errors(name, out)
    return {
        "cpu_ms_per_1k": 1e6 * sampler.over(stats["first_ns"], stats["last_ns"]) / stats["tokens"],
        "tok_s": stats["tokens"] / window,
        "err_p50": float(np.percentile(errs, 50)) if errs else None,
        "err_p99": float(np.percentile(errs, 99)) if errs else None,
        "server_tick_p99": stats["tick_p99_ms"],
    }


def write_tokenizer(folder: Path) -> None:
    """A tiny word-level tokenizer so ``vllm bench serve`` needs nothing from a hub."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(1000)}}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 100000}
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))


def run_one(client: str, url: str, c: int, args: argparse.Namespace, root: Path) -> dict[str, Any] | None:
    out = root / f"{client}-c{c}-{time.perf_counter_ns()}"
    out.mkdir(parents=True)
    n = max(12, args.requests_per_c * c)  # at c = 1, 4 requests were too few tokens for a CPU figure
    if client == "floor":
        argv = [
            sys.executable,
            str(HERE / "client_floor.py"),
            url,
            str(c),
            str(n),
            str(args.tokens),
            str(out),
        ]
    elif client.startswith("specbench"):
        transport = client.partition("-")[2] or "aiohttp"
        worker = [url, str(c), str(n), str(args.tokens), str(out), transport]
        argv = [sys.executable, __file__, "--worker", *worker]
    else:
        write_tokenizer(out / "tok")
        argv = peer_command(client, args.binaries[client], url, c, n, args.tokens, out)
    return measure(client, argv, url, out, args.client_cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--c", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--requests-per-c", type=int, default=4)
    parser.add_argument(
        "--clients",
        nargs="+",
        default=["specbench", "floor", *PEERS],
        choices=["specbench", "specbench-poll", "specbench-procs2", "floor", *PEERS],
        help="specbench (aiohttp, as the runner), specbench-poll (stamped at the loop's poll, as where "
        "the kernel gives no receive times), specbench-procs2 (client_processes: 2), "
        "floor (bench/client_floor.py: a reader that does nothing else, the timestamp "
        "error this machine and server allow any client), and the peers",
    )
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="server on the first CPU, clients on the others (where there are two or more)",
    )
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--hiccups", help=argparse.SUPPRESS)  # the CPU to measure ("": any)
    args = parser.parse_args()
    if args.hiccups is not None:
        if args.hiccups:
            os.sched_setaffinity(0, {int(args.hiccups)})
        print(busy_gaps())
        return
    if args.worker:
        url, c, n, tokens, out, transport = args.worker
        asyncio.run(specbench_load(url, int(c), int(n), int(tokens), Path(out), transport))
        return
    args.binaries = {name: peer_binary(name) for name in args.clients if name in PEERS}
    clients = [name for name in args.clients if name not in PEERS or args.binaries[name]]
    port = free_port()
    server_argv = [sys.executable, str(HERE / "stream_server.py"), "--port", str(port)]
    server_argv += ["--interval-ms", str(args.interval_ms), "--tokens-per-chunk", str(args.tokens_per_chunk)]
    # As the table was measured: the server on one core, each client on another (its
    # worker processes too); this harness, which only samples CPU, stays with the server.
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_cpus = {cpus[0]} if args.pin and len(cpus) >= 2 else None
    args.client_cpus = set(cpus[1:]) if server_cpus else None
    if server_cpus:
        os.sched_setaffinity(0, server_cpus)
        print(f"server and harness on CPU {cpus[0]}, each client on CPU(s) {sorted(args.client_cpus)}")
    busy: list[int | None] = list(cpus) or [None]
    for cpu, lost in zip(busy, hiccups(busy), strict=True):
        print(f"a busy thread on CPU {cpu} (all {len(busy)} busy) lost {lost} (gaps > 0.2 ms)", flush=True)
    server = subprocess.Popen(server_argv, stdout=subprocess.PIPE, text=True, preexec_fn=pinned(server_cpus))
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        report(clients, f"http://127.0.0.1:{port}", args)
    finally:
        server.terminate()
        server.wait()


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def report(clients: list[str], url: str, args: argparse.Namespace) -> None:
    print(
        f"{args.tokens} tokens/request, one chunk of {args.tokens_per_chunk} token(s) every "
        f"{args.interval_ms} ms; error = |client gap - true gap| per pair of token chunks"
    )
    head = f"{'client':<16} {'c':>4} {'CPU ms/1k tok':>14} {'tok/s':>9} {'err p50 ms':>11} "
    print(head + f"{'err p99 ms':>11} {'srv tick p99':>12} {'CPU/best peer':>13} {'tok/s/best peer':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.c:
            done = {name: run_one(name, url, c, args, Path(tmp)) for name in clients}
            rows = {name: r for name, r in done.items() if r is not None}
            peers = {name: r for name, r in rows.items() if name in PEERS} or rows
            if not rows:
                continue
            best_cpu = min(r["cpu_ms_per_1k"] for r in peers.values())
            best_tps = max(r["tok_s"] for r in peers.values())
            for name, r in rows.items():
                print(
                    f"{name:<16} {c:>4} {r['cpu_ms_per_1k']:>14.1f} {r['tok_s']:>9.0f} "
                    f"{_ms(r['err_p50']):>11} {_ms(r['err_p99']):>11} {r['server_tick_p99'] or 0:>12.2f} "
                    f"{r['cpu_ms_per_1k'] / best_cpu:>12.2f}x {r['tok_s'] / best_tps:>14.2f}x",
                    flush=True,
                )
            if "specbench" in rows and peers is not rows:
                floor = (rows.get("floor") or {}).get("err_p99")
                print(goals_line(c, rows["specbench"], best_cpu, best_tps, floor), flush=True)


def goals_line(c: int, r: dict[str, Any], best_cpu: float, best_tps: float, floor: float | None) -> str:
    """Whether specbench met the issue's goals at this concurrency, each with its figure; beside
    the timestamp error, the floor client's (what this machine and server allow any client)."""
    parts = [
        f"CPU/token {'met' if r['cpu_ms_per_1k'] <= best_cpu else 'MISSED'} "
        f"({r['cpu_ms_per_1k'] / best_cpu:.2f}x best peer)",
        f"tok/s {'met' if r['tok_s'] >= 0.95 * best_tps else 'MISSED'} ({r['tok_s'] / best_tps:.2f}x)",
    ]
    if c <= 64:
        p99 = r["err_p99"]
        ok = p99 is not None and p99 < 0.1
        at_floor = f"; the floor client's {_ms(floor)} ms" if floor is not None else ""
        parts.append(f"timestamp error p99 {'met' if ok else 'MISSED'} ({_ms(p99)} ms{at_floor})")
    return f"  goals at c={c}: " + "; ".join(parts)


if __name__ == "__main__":
    main()
