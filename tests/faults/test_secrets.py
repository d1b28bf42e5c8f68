"""Secrets never written: every file of the run directory and its report is grepped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specbench import api
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess, free_port
from specbench.redact import MASK, Redactor, mask_args
from specbench.report import render_report
from specbench.store import RunStore
from tests.conftest import Pair
from tests.faults.engine_util import kill_all, tag, tagged_matrix

KEY = "sk-llama-5ecret-4f1d"
TOKEN = "hf_t0ken_9b7c2e"
PASSWORD = "pw-attach-77a1"


def _leaks(root: Path, *secrets: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


def test_secret_flags_env_and_url_passwords_are_masked(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("file-key-0001\nfile-key-0002\n")
    red = Redactor()
    red.add_args(["--api-key", KEY, "--api-key-file", str(keys), "--hf-token=" + TOKEN])
    red.add_env({"HF_TOKEN": "env-token-123", "OMP_NUM_THREADS": "1234"})
    text = f"{KEY} {TOKEN} file-key-0002 env-token-123 1234 http://me:{PASSWORD}@host:8/v1"
    assert red.scrub(text) == f"{MASK} {MASK} {MASK} {MASK} 1234 http://me:{MASK}@host:8/v1"
    assert mask_args(["-m", "x", "--api-key", KEY, f"--hf-token={TOKEN}"]) == [
        "-m",
        "x",
        "--api-key",
        MASK,
        f"--hf-token={MASK}",
    ]


@pytest.mark.engine
def test_a_launched_server_with_an_api_key_is_measured_and_nothing_leaks(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    name = tag()
    matrix = tagged_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        name,
        repeats=1,
        forward_probe=False,
        env={"HF_TOKEN": TOKEN},
    )
    raw = yaml.safe_load(matrix.read_text())
    raw["common_args"] += ["--api-key", KEY]
    matrix.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    try:
        api.prepare_run(matrix, out).run()
    finally:
        kill_all(name)
    store = RunStore(out)
    assert len(store.completed()) == 3  # the key went along as a bearer token
    assert store.cells()[0]["server"]["slots_speculative"] == [False]  # /slots read with the key
    render_report(out, ["md", "html", "json", "csv"])
    assert _leaks(out, KEY, TOKEN) == []
    assert MASK in (out / "report" / "BENCHMARK_ENV.md").read_text()


@pytest.mark.engine
def test_an_attached_server_takes_its_key_from_the_environment(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tag()
    port = free_port()
    argv = LlamaCppEngine(llama_server).command(
        str(dense_pair.target), ["--alias", name, "--api-key", KEY], "127.0.0.1", port
    )
    server = ServerProcess(argv, tmp_path / "engine.log")
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=1, forward_probe=False)
    raw = yaml.safe_load(matrix.read_text())
    matrix.write_text(yaml.safe_dump({**raw, "engine": "openai", "model": "", "common_args": []}))
    monkeypatch.setenv("SPECBENCH_TEST_KEY", KEY)
    out = tmp_path / "run"
    try:
        server.start(f"http://127.0.0.1:{port}/health", timeout=120)
        runner = api.prepare_run(
            matrix,
            out,
            attach=f"http://127.0.0.1:{port}",
            arm="served",
            api_key_env="SPECBENCH_TEST_KEY",
        )
        runner.run()
    finally:
        server.stop()
        kill_all(name)
    assert len(RunStore(out).completed()) == 3
    render_report(out, ["md", "html", "json"])
    assert _leaks(out, KEY) == []


def test_an_attach_url_password_never_reaches_the_run_directory(tmp_path: Path) -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:9/"
    red = Redactor()
    red.add(PASSWORD)
    store = RunStore(tmp_path / "run", red)
    store.create({"matrix": {"arms": {"a": []}}, "attach": url}, resume=False)
    store.set_arm_status("a", attached=url)
    store.append_cell({"arm": "a", "repeat": 0, "base_url": url})
    store.append_record({"arm": "a", "prompt_id": "p", "repeat": 0, "error": {"message": url}})
    store.save_scrape("a", 0, "before", f"# scraped from {url}")
    store.close()
    assert _leaks(tmp_path / "run", PASSWORD) == []
    assert RunStore(tmp_path / "run").manifest()["attach"] == f"http://user:{MASK}@127.0.0.1:9/"
