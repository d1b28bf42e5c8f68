"""Secrets never written: every file of the run directory and its report is grepped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from specbench import api
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess, free_port
from specbench.report import render_report
from specbench.store.redact import MASK, Redactor, mask_args
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.procs import kill_all, specbench, tag, tagged_matrix

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


def _echoing_engine(folder: Path) -> Path:
    """STAND-IN engine (not vLLM): answers ``--version``, otherwise prints its arguments, the way
    vLLM logs its non-default arguments at start-up, then an error line holding the key, an ANSI
    escape and a rich closing tag, and exits 1 before it serves anything."""
    path = folder / "echo-engine"
    path.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "if '--version' in sys.argv:\n"
        "    print('0.0.0-standin'); sys.exit(0)\n"
        "print('INFO non-default args:', sys.argv[1:], flush=True)\n"
        "key = sys.argv[sys.argv.index('--api-key') + 1]\n"
        "print('ERROR: engine failed: --api-key', key, '\\x1b[31mred\\x1b[0m [/INST]', flush=True)\n"
        "sys.exit(1)\n"
    )
    path.chmod(0o755)
    return path


def test_an_engine_that_prints_its_key_and_fails_to_start_leaks_it_nowhere(tmp_path: Path) -> None:
    """The issue's case: the start-failure path wrote the key to logs/<arm>.log and printed it in
    the log tail; the error line also reached the terminal with its ANSI escape raw, and its
    "[/INST]" ended the run as an internal error (rich MarkupError)."""
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"id": "p1", "prompt": "hi"}) + "\n")
    matrix = {
        "engine": "vllm",
        "model": "stand-in/model",
        "engine_binary": str(_echoing_engine(tmp_path)),
        "common_args": ["--api-key", KEY],
        "arms": {"baseline": []},
        "workload": {"suite": "natural", "max_tokens": 4, "prompts": 1, "prompt_file": "prompts.jsonl"},
        "repeats": 1,
        "warmup": 0,
        "startup_timeout": 60,
    }
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(matrix))
    out = tmp_path / "run"
    proc = specbench("run", str(tmp_path / "matrix.yaml"), "--out", str(out), "--no-report")
    output = proc.communicate(timeout=300)[0]
    assert proc.returncode == 4, output  # an engine that would not start: the documented code, not 1
    assert KEY not in output and _leaks(out, KEY) == []
    assert "\x1b" not in output and "\\x1b[31mred" in output and "[/INST]" in output
    log = (out / "logs" / "baseline.log").read_text()
    assert f"--api-key {MASK} " in log and "'--api-key', '***'" in log  # scrubbed, otherwise intact
    failures = RunStore(out).manifest()["arms"]["baseline"]["start_failures"]
    assert len(failures) == 2 and all(MASK in f["error"] for f in failures)


def _linear_cases() -> list[tuple[str, str, str]]:
    """(name, text, what the scrub must make of it), 10 MB each."""
    word = "x" * 10_000_000  # one unbroken word: the old URL regex retried it from every letter
    line = "# an arm for later, see https://example.org/docs and a:b c://d or ftp://u:pw-77@host/\n"
    comment = line * (10_000_000 // len(line))
    clean = comment.replace("ftp://u:pw-77@", f"ftp://u:{MASK}@")
    secret = f"{KEY} in http://me:{PASSWORD}@h/ "
    masked = f"{MASK} in http://me:{MASK}@h/ "
    return [
        ("word", word, word),
        ("word with secrets", word + secret + word[:1000], word + masked + word[:1000]),
        ("comment", comment, clean),
        ("comment with secrets", secret + comment + secret, masked + clean + masked),
        ("slashes", "a://" * 2_500_000, "a://" * 2_500_000),
    ]


@pytest.mark.parametrize("name, text, expected", _linear_cases(), ids=[c[0] for c in _linear_cases()])
def test_the_scrub_is_linear_on_ten_megabytes(name: str, text: str, expected: str) -> None:
    """It finishes (the old regex needed ~40 s for 100 KB of one word and never ended on 10 MB),
    removes every secret and leaves everything else byte for byte."""
    red = Redactor()
    red.add(KEY, PASSWORD)
    assert red.scrub(text) == expected


def test_url_passwords_are_masked_as_the_documented_pattern_says() -> None:
    cases = {
        "http://me:pw@h": f"http://me:{MASK}@h",
        "git+ssh://me:p:w@h/x": f"git+ssh://me:{MASK}@h/x",
        "1://me:pw@h": "1://me:pw@h",  # a scheme starts with a letter
        "a1+.-://:pw@h": f"a1+.-://:{MASK}@h",
        "http://me@h http://u:p/x@h": "http://me@h http://u:p/x@h",  # no password, or a path
        "x://a:b@ y://c:d@": f"x://a:{MASK}@ y://c:{MASK}@",
    }
    assert {text: Redactor().scrub(text) for text in cases} == cases


def test_a_scrubbed_log_keeps_bytes_that_are_not_utf8_and_what_came_before(tmp_path: Path) -> None:
    log = tmp_path / "arm.log"
    head = f"earlier launch: {KEY}\n".encode()  # before the offset: not this launch's to scrub
    log.write_bytes(head + b"\xff\xfe raw " + KEY.encode() + b" http://u:pw@h\n")
    red = Redactor()
    red.add(KEY)
    red.scrub_file(log, len(head))
    assert log.read_bytes() == head + b"\xff\xfe raw " + f"{MASK} http://u:{MASK}@h\n".encode()
