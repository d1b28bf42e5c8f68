"""Side-by-side client cost (not a test: no thresholds). Every client drives the same fast local
streaming server (bench/stream_server.py, its own process) at each concurrency, and this prints,
per client and concurrency: client CPU ms per 1000 tokens (the client process's CPU over the
server's load window, first request to last token), achieved tok/s, the per-token timestamp error
(client gap minus the server's true send gap, chunk by chunk, p50/p99) and the ratio to the best
peer. Peers run when their own venv exists in the cache (``vllm bench serve`` from
``~/.cache/specbench/vllm/*/bin/vllm``); nothing is installed into the project's environment.

    .venv/bin/python bench/client_overhead.py [--c 1 16 64 256] [--tokens 256] [--interval-ms 2]
        [--requests-per-c 4] [--tokens-per-chunk 1] [--clients specbench vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
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

import httpx
import numpy as np
import psutil

HERE = Path(__file__).resolve().parent


# -- the specbench client, as the runner drives it --------------------------------------------
async def specbench_load(url: str, c: int, n: int, tokens: int, out: Path, transport: str) -> None:
    """n requests with at most c in flight, each record appended to a run store, as the runner does."""
    from specbench.client import chat_body, open_streamer, stream_chat
    from specbench.recordwriter import RecordWriter
    from specbench.store import RunStore

    writer = RecordWriter(RunStore(out))
    limit = asyncio.Semaphore(c)
    body = chat_body([{"role": "user", "content": "hi"}], tokens, 0.0, 0, {"ignore_eos": True})

    async def one(i: int, session: Any) -> None:
        async with limit:
            result = await stream_chat(session, f"{url}/v1/chat/completions", body, 600)
            record = {"arm": "a", "prompt_id": f"p{i}", "repeat": 0, "warmup": False, **result}
            writer.append(record)

    if transport == "httpx":  # the path the runner took before, with the pool limit lifted
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        session_cm: Any = httpx.AsyncClient(timeout=600, limits=limits)
    else:
        session_cm = open_streamer(600, c)
    async with session_cm as session:
        await asyncio.gather(*(one(i, session) for i in range(n)))
    writer.close()


def gap_errors(records_path: Path) -> list[float]:
    """|client gap − server gap| in ms for every consecutive pair of token chunks."""
    errors: list[float] = []
    for line in records_path.read_text().splitlines():
        rec = json.loads(line)
        pairs = [(c[0], int(c[1].split()[0][1:])) for c in rec["chunks"] if c[1] and c[1].startswith("@")]
        for (t0, s0), (t1, s1) in itertools.pairwise(pairs):
            errors.append(abs((t1 - t0) - (s1 - s0)) / 1e6)
    return errors


# -- vllm bench serve as a peer ----------------------------------------------------------------
def vllm_binary() -> str | None:
    cache = Path(os.environ.get("SPECBENCH_CACHE", Path.home() / ".cache" / "specbench"))
    found = sorted(glob.glob(str(cache / "vllm" / "*" / "bin" / "vllm")))
    return found[-1] if found else None


def vllm_command(binary: str, url: str, c: int, n: int, tokens: int, out: Path) -> list[str]:
    return [
        binary, "bench", "serve", "--backend", "openai-chat", "--base-url", url,
        "--endpoint", "/v1/chat/completions", "--model", "bench", "--tokenizer", str(out / "tok"),
        "--dataset-name", "random", "--random-input-len", "8", "--random-output-len", str(tokens),
        "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos",
        "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "r.json",
    ]  # fmt: skip


def vllm_errors(out: Path, interval_ms: float) -> list[float]:
    data = json.loads((out / "r.json").read_text())
    return [abs(x * 1000 - interval_ms) for itls in data.get("itls", []) for x in itls]


# -- the harness -------------------------------------------------------------------------------
class CpuSampler(threading.Thread):
    """Samples a process tree's CPU seconds every 5 ms, so CPU over any window is interpolated."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.samples, self.stop = psutil.Process(pid), [], threading.Event()

    def cpu(self) -> float:
        procs = [self.proc, *self.proc.children(recursive=True)]
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.perf_counter_ns(), self.cpu()))
            except psutil.Error:
                return
            time.sleep(0.005)

    def over(self, start_ns: int, end_ns: int) -> float:
        t = np.array([s[0] for s in self.samples], dtype=float)
        v = np.array([s[1] for s in self.samples])
        return float(np.interp(end_ns, t, v) - np.interp(start_ns, t, v))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(name: str, argv: list[str], url: str, interval_ms: float, out: Path) -> dict[str, Any]:
    httpx.get(f"{url}/reset")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = CpuSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed: {err[-2000:]}")
    stats = httpx.get(f"{url}/stats").json()
    window = (stats["last_ns"] - stats["first_ns"]) / 1e9
    errs = (
        gap_errors(out / "records.jsonl") if name.startswith("specbench") else vllm_errors(out, interval_ms)
    )
    return {
        "cpu_ms_per_1k": 1e6 * sampler.over(stats["first_ns"], stats["last_ns"]) / stats["tokens"],
        "tok_s": stats["tokens"] / window,
        "err_p50": float(np.percentile(errs, 50)) if errs else float("nan"),
        "err_p99": float(np.percentile(errs, 99)) if errs else float("nan"),
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


def run_one(client: str, url: str, c: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    out = root / f"{client}-c{c}-{time.perf_counter_ns()}"
    out.mkdir(parents=True)
    n = max(4, args.requests_per_c * c)
    if client.startswith("specbench"):
        transport = client.partition("-")[2] or "aiohttp"
        argv = [
            sys.executable,
            __file__,
            "--worker",
            url,
            str(c),
            str(n),
            str(args.tokens),
            str(out),
            transport,
        ]
    else:
        binary = vllm_binary()
        assert binary is not None
        write_tokenizer(out / "tok")
        argv = vllm_command(binary, url, c, n, args.tokens, out)
    return measure(client, argv, url, args.interval_ms, out)


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
        default=["specbench", "vllm"],
        help="specbench (aiohttp, as the runner), specbench-httpx (the httpx path), vllm",
    )
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        url, c, n, tokens, out, transport = args.worker
        asyncio.run(specbench_load(url, int(c), int(n), int(tokens), Path(out), transport))
        return
    clients = [c for c in args.clients if c != "vllm" or vllm_binary()]
    if "vllm" in args.clients and "vllm" not in clients:
        print("vllm bench serve: no venv at ~/.cache/specbench/vllm/*/bin/vllm, skipped")
    port = free_port()
    server_argv = [sys.executable, str(HERE / "stream_server.py"), "--port", str(port)]
    server_argv += ["--interval-ms", str(args.interval_ms), "--tokens-per-chunk", str(args.tokens_per_chunk)]
    server = subprocess.Popen(server_argv, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        report(clients, f"http://127.0.0.1:{port}", args)
    finally:
        server.terminate()
        server.wait()


def report(clients: list[str], url: str, args: argparse.Namespace) -> None:
    print(
        f"{args.tokens} tokens/request, one chunk of {args.tokens_per_chunk} token(s) every "
        f"{args.interval_ms} ms; error = |client gap - true gap| per chunk"
    )
    head = f"{'client':<16} {'c':>4} {'CPU ms/1k tok':>14} {'tok/s':>9} {'err p50 ms':>11} "
    print(head + f"{'err p99 ms':>11} {'srv tick p99':>12} {'CPU vs best':>11} {'tok/s vs best':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.c:
            rows = {name: run_one(name, url, c, args, Path(tmp)) for name in clients}
            best_cpu = min(r["cpu_ms_per_1k"] for r in rows.values())
            best_tps = max(r["tok_s"] for r in rows.values())
            for name, r in rows.items():
                print(
                    f"{name:<16} {c:>4} {r['cpu_ms_per_1k']:>14.1f} {r['tok_s']:>9.0f} "
                    f"{r['err_p50']:>11.3f} {r['err_p99']:>11.3f} {r['server_tick_p99'] or 0:>12.2f} "
                    f"{r['cpu_ms_per_1k'] / best_cpu:>10.2f}x {r['tok_s'] / best_tps:>12.2f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
