"""The peer load generators bench/client_overhead.py measures specbench's client against.

Each peer runs from its own virtual environment in the cache, never from the project's:
``vllm bench serve`` from the vLLM CPU venv specbench's engine setup makes
(``~/.cache/specbench/vllm/*/bin/vllm``), AIPerf and GuideLLM from
``~/.cache/specbench/bench-peers/<name>``, created here on first use with a pinned version. A peer
that cannot be installed (no network, no wheel) is reported with the reason and left out.

The timestamp error is one definition for every client that exposes per-chunk times: for each
pair of consecutive token chunks of a request, |client gap − server gap|, where the server gap
comes from the ``@<perf_counter_ns>`` each chunk of bench/stream_server.py carries in its text.
``vllm bench serve`` saves per-chunk gaps (``itls``) and the generated text, AIPerf per-chunk gaps
(``inter_chunk_latency``) and the text (``outputs.json``); GuideLLM keeps only first and last token
times per request, so it has no per-token figure ("n/a").
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(os.environ.get("SPECBENCH_CACHE", Path.home() / ".cache" / "specbench"))
PEERS_DIR = CACHE / "bench-peers"
# Pinned so a figure can be reproduced; the versions the first table was measured with.
PINS = {"aiperf": "0.13.0", "guidellm": "0.8.1"}
PEERS = ("vllm", "aiperf", "guidellm")
_STAMP = re.compile(r"@(\d+)")


def vllm_binary() -> str | None:
    found = sorted(glob.glob(str(CACHE / "vllm" / "*" / "bin" / "vllm")))
    return found[-1] if found else None


def peer_binary(name: str) -> str | None:
    """The peer's executable, installing AIPerf or GuideLLM on first use; None (and why, printed)
    when it is not available."""
    if name == "vllm":
        binary = vllm_binary()
        if binary is None:
            print("vllm: no venv at ~/.cache/specbench/vllm/*/bin/vllm (specbench engine install vllm)")
        return binary
    venv = PEERS_DIR / name
    pin = f"{name}=={PINS[name]}"
    marker = venv / ".specbench-pin"
    if not (marker.exists() and marker.read_text().strip() == pin):
        why = _install(venv, pin)
        if why:
            print(f"{name}: could not install {pin} into {venv} ({why}); skipped", flush=True)
            return None
        marker.write_text(pin + "\n")
    return str(venv / "bin" / name)


def _install(venv: Path, pin: str) -> str | None:
    """pip-install ``pin`` into its own venv; the reason on failure, else None."""
    print(f"installing {pin} into {venv} (first use; GuideLLM brings torch, several GB)", flush=True)
    if not (venv / "bin" / "python").exists():
        shutil.rmtree(venv, ignore_errors=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            return _last_line(made.stderr) or "python -m venv failed"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", pin]
    done = subprocess.run(pip, capture_output=True, text=True)
    if done.returncode != 0:
        return _last_line(done.stderr) or f"pip exited {done.returncode}"
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING")]
    return lines[-1].strip()[:300] if lines else ""


def peer_command(name: str, binary: str, url: str, c: int, n: int, tokens: int, out: Path) -> list[str]:
    """Each peer at its lightest that still streams, counts and saves per-request results."""
    tok = str(out / "tok")
    if name == "vllm":
        return [
            binary, "bench", "serve", "--backend", "openai-chat", "--base-url", url,
            "--endpoint", "/v1/chat/completions", "--model", "bench", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "8", "--random-output-len", str(tokens),
            "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos",
            "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "r.json",
        ]  # fmt: skip
    if name == "aiperf":
        # --use-server-token-count: no client-side tokenizing of every response (specbench does none).
        return [
            binary, "profile", "--model", "bench", "--url", url, "--endpoint-type", "chat",
            "--streaming", "--tokenizer", tok, "--isl", "8", "--isl-stddev", "0", "--osl", str(tokens),
            "--extra-inputs", f"max_tokens:{tokens}", "--extra-inputs", "ignore_eos:true",
            "--concurrency", str(c), "--request-count", str(n), "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry", "--use-server-token-count",
            "--export-outputs-json", "--artifact-dir", str(out / "aiperf"),
        ]  # fmt: skip
    backend = {
        "kind": "openai_http", "target": url, "model": "bench", "validate_backend": False,
        "http2": False, "extras": {"body": {"ignore_eos": True, "max_tokens": tokens}},
    }  # fmt: skip
    return [
        binary, "run", "--backend", json.dumps(backend),
        "--profile", json.dumps({"kind": "concurrent", "streams": [c]}),
        "--constraint", json.dumps({"kind": "max_requests", "count": n}),
        "--tokenizer", json.dumps({"kind": "huggingface_auto", "model": tok}),
        "--data", json.dumps({"kind": "synthetic_text", "prompt_tokens": 8, "output_tokens": tokens}),
        "--output", json.dumps({"kind": "json", "path": str(out / "guidellm.json")}),
        "--disable-console",
    ]  # fmt: skip


def stamps(text: str) -> list[int]:
    """The server's send times, in order, from a response's text."""
    return [int(s) for s in _STAMP.findall(text)]


def pair_errors(client_gaps_ms: list[float], sent_ns: list[int]) -> list[float]:
    """|client gap − server gap| in ms, gap k between token chunks k and k+1."""
    server = [(b - a) / 1e6 for a, b in itertools.pairwise(sent_ns)]
    if len(server) != len(client_gaps_ms):
        return []  # a request whose chunks cannot be lined up is left out, not guessed at
    return [abs(cg - sg) for cg, sg in zip(client_gaps_ms, server, strict=True)]


def peer_errors(name: str, out: Path) -> list[float] | None:
    """Every per-token timestamp error of a peer's run; None when the peer keeps no per-chunk times."""
    errors: list[float] = []
    if name == "vllm":
        data = json.loads((out / "r.json").read_text())
        for itl, text in zip(data.get("itls", []), data.get("generated_texts", []), strict=False):
            # itls[0] runs from the role-only first event to the first token: no server gap to match.
            errors += pair_errors([x * 1000 for x in itl[1:]], stamps(text))
        return errors
    if name == "aiperf":
        outputs = json.loads((out / "aiperf" / "outputs.json").read_text())["data"]
        text = {o["x_request_id"]: o.get("response_text") or "" for o in outputs}
        for line in (out / "aiperf" / "profile_export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            gaps = (rec["metrics"].get("inter_chunk_latency") or {}).get("value") or []
            errors += pair_errors(list(gaps), stamps(text.get(rec["metadata"]["x_request_id"], "")))
        return errors
    return None
