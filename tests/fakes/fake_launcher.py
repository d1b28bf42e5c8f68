"""FAKE engine processes for launch-mode tests: ``vllm serve ...`` and
``python -m sglang.launch_server ...`` as specbench sees them from outside. Not vLLM, not SGLang.

``tests/fakes/bin/fake-vllm`` and ``tests/fakes/bin/fake-sglang-python`` run
``python -m tests.fakes.fake_launcher vllm|sglang ARGS``. Each parses the argv specbench builds
(engines/vllm.py, engines/sglang.py), serves the in-process fakes (fake_vllm.py, fake_sglang.py)
on the given host and port, writes the engine's documented log lines to stdout (specbench sends
it to ``logs/<arm>.log``) and exits 0 on SIGTERM. With no speculative flags it serves like the
engine without speculation: no vLLM spec counters, SGLang's ``speculative_algorithm`` None.

Switches, read from the environment so that a matrix's ``env`` sets them for every arm:

- ``FAKE_VLLM_CUDAGRAPH_DOWNGRADE=1``: a speculative vLLM server logs the CUDA-graph downgrade
  warning at startup (vLLM startup log; docs/engines.md "degradation");
- ``FAKE_ENGINE_IGNORE_SPECULATION=1``: speculative flags are parsed but not honoured, the way a
  configuration that did not take looks from outside.

Log lines are written once per request, not every 10 s (vLLM) or every ``--decode-log-interval``
steps (SGLang): one request per interval keeps the sums exact for the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from types import FrameType

from tests.fakes import fake_sglang as fs
from tests.fakes import fake_vllm as fv
from tests.fakes.common import Handler, Request, Response, make_server

CUDAGRAPH_DOWNGRADE = "FAKE_VLLM_CUDAGRAPH_DOWNGRADE"
IGNORE_SPECULATION = "FAKE_ENGINE_IGNORE_SPECULATION"


def log(line: str) -> None:
    # stdout is a file under specbench: flush, or the runner reads the log before the line lands.
    print(line, flush=True)


def switch(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def after_chat(handler: Handler, logged: Callable[[], None]) -> Handler:
    """``handler`` with one log call after each chat completion, before the response is sent (so
    the line is in the log when the client has the answer), one request at a time (the fakes
    count per request)."""
    lock = threading.Lock()

    def wrapped(request: Request) -> Response:
        with lock:
            response = handler(request)
            if request.method == "POST" and request.url.path == "/v1/chat/completions":
                logged()
            return response

    return wrapped


def serve_until_sigterm(server: ThreadingHTTPServer) -> int:
    """Serve until SIGTERM (specbench's teardown), then close the socket and exit 0."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        log("INFO: Shutting down (SIGTERM)")
    return 0


# -- vLLM --------------------------------------------------------------------------------------
def vllm_parser() -> argparse.ArgumentParser:
    """``vllm --version`` and ``vllm serve MODEL ...`` with the speculative spellings specbench
    knows (engines/vllm.py ``spec_flags``) and ``--per-request-spec-decode-metrics`` (vLLM docs)."""
    parser = argparse.ArgumentParser(prog="vllm")
    parser.add_argument("--version", action="version", version=fv.FakeVllm().version)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--speculative-config", "--speculative_config", "-sc", dest="speculative_config", type=json.loads
    )
    serve.add_argument(
        "--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"), default="none"
    )
    return parser


def vllm_spec_line() -> str:
    """One request's ``SpecDecoding metrics:`` line in the current format (vLLM docs), from the
    fake's per-request constants, so the log agrees with its counters."""
    per_pos = ", ".join(f"{p / fv.DRAFTS:.3f}" for p in fv.PER_POS)
    return (
        "(APIServer pid=1) INFO [metrics.py:100] SpecDecoding metrics: Mean acceptance length: "
        f"{1 + fv.ACCEPTED / fv.DRAFTS:.2f}, Accepted throughput: 0.50 tokens/s, Drafted throughput: "
        f"0.90 tokens/s, Accepted: {fv.ACCEPTED} tokens, Drafted: {fv.DRAFT_TOKENS} tokens, "
        f"Per-position acceptance rate: {per_pos}, "
        f"Avg Draft acceptance rate: {100 * fv.ACCEPTED / fv.DRAFT_TOKENS:.1f}%"
    )


def run_vllm(argv: list[str]) -> int:
    # Other flags (--max-num-seqs, --gpu-memory-utilization, ...) are accepted and ignored.
    opts, others = vllm_parser().parse_known_args(argv)
    speculative = opts.speculative_config is not None and not switch(IGNORE_SPECULATION)
    fake = fv.FakeVllm(
        model=opts.model,
        speculative=speculative,
        per_request_metrics=opts.per_request_spec_decode_metrics != "none",
    )
    log(f"(APIServer pid={os.getpid()}) INFO FAKE vLLM {fake.version}: model={opts.model} args={others}")
    if speculative and switch(CUDAGRAPH_DOWNGRADE):
        log(fv.LOG_LINES["cuda_graph"])

    def logged() -> None:
        log(fv.LOG_LINES["unrelated"])
        if speculative:
            log(vllm_spec_line())

    server = make_server(after_chat(fake.handler, logged), opts.host, opts.port)
    log(f"INFO: Uvicorn running on http://{opts.host}:{opts.port} (Press CTRL+C to quit)")
    return serve_until_sigterm(server)


# -- SGLang ------------------------------------------------------------------------------------
def sglang_parser() -> argparse.ArgumentParser:
    """The launch flags specbench sets and the speculative ones from SGLang's docs that the fake reads."""
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    parser.add_argument("--model-path", "--model", dest="model_path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--speculative-algorithm")
    parser.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
    for name in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"):
        parser.add_argument(name, type=int)
    return parser


def sglang_decode_line(fake: fs.FakeSglang) -> str:
    """The decode log line (SGLang docs): ``accept len``/``accept rate`` only while speculating, as
    SGLang's ``log_decode_stats`` adds them only when ``spec_algorithm`` is set."""
    spec = ""
    if fake.algorithm and fake.window:
        spec = f"accept len: {fake.window[0]:.2f}, accept rate: {fake.window[1]:.2f}, "
    return (
        "[2025-05-14 08:30:00 TP0] Decode batch, #running-req: 1, #token: 512, token usage: 0.01, "
        f"{spec}cuda graph: True, gen throughput (token/s): 182.35, #queue-req: 0, "
    )


def run_sglang(argv: list[str]) -> int:
    opts, others = sglang_parser().parse_known_args(argv)
    algorithm = None if switch(IGNORE_SPECULATION) else opts.speculative_algorithm
    fake = fs.FakeSglang(model=opts.model_path, algorithm=algorithm, enable_metrics=opts.enable_metrics)
    log(f"[TP0] FAKE SGLang {fake.version}: model={opts.model_path} args={others}")
    handler = after_chat(fake.handler, lambda: log(sglang_decode_line(fake)))
    server = make_server(handler, opts.host, opts.port)
    log("The server is fired up and ready to roll!")
    return serve_until_sigterm(server)


ENGINES: dict[str, Callable[[list[str]], int]] = {"vllm": run_vllm, "sglang": run_sglang}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ENGINES:
        print(f"usage: python -m tests.fakes.fake_launcher {{{','.join(ENGINES)}}} ARGS", file=sys.stderr)
        return 2
    return ENGINES[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
