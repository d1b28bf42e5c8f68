"""A run keeps the argument table its flags were checked against (``engine_args.json``), so the
report reads flags the same way on any machine, with any engine installed or none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import api
from specbench.engines import argstore, helptext
from specbench.engines.argtable import ArgTable
from specbench.engines.helpparse import parse_argparse_help, parse_llama_help
from specbench.engines.vllm import REWRITES
from specbench.errors import StoreError
from tests.support.argtable import fake_llama_server

DATA = Path(__file__).parent / "data"
LLAMA = parse_llama_help((DATA / "llama-server-help.txt").read_text())
VLLM = parse_argparse_help(
    (DATA / "vllm-serve-help-excerpt.txt").read_text(), "vllm serve", dotted=True, rewrites=REWRITES
)


@pytest.mark.parametrize("table", [LLAMA, VLLM, None], ids=["llama.cpp", "vllm", "none"])
def test_a_stored_table_reads_back_as_the_same_table(table: ArgTable | None, tmp_path: Path) -> None:
    text = argstore.dumps(table)
    assert text == json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True)  # compact
    (tmp_path / argstore.ARGS_FILE).write_text(text)
    stored = argstore.read(tmp_path)
    assert stored is not None and stored.table == table


def test_no_file_is_no_stored_table_and_a_damaged_one_is_a_one_line_store_error(tmp_path: Path) -> None:
    assert argstore.read(tmp_path) is None  # a run made before tables were kept
    path = tmp_path / argstore.ARGS_FILE
    for damaged in ("{{{", "[1, 2]", json.dumps({"format": 99, "table": None}), '{"format":1,"table":{}}'):
        path.write_text(damaged)
        with pytest.raises(StoreError) as err:
            argstore.read(tmp_path)
        assert str(err.value).startswith(f"{path}: damaged") and "\n" not in str(err.value)
        assert err.value.exit_code == 5


def test_a_new_run_stores_the_table_its_flags_were_checked_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    helptext.cached_help_text.cache_clear()
    (tmp_path / "m.gguf").write_bytes(b"\0" * 1024)
    binary = fake_llama_server(tmp_path)
    (tmp_path / "m.yaml").write_text(
        f"model: m.gguf\nengine_binary: {binary}\ncommon_args: [-t, '1']\n"
        "arms:\n  baseline: []\n  ngram: [--threads, '1', --spec-type, ngram-mod]\n"
        "workload: {suite: natural, max_tokens: 16, prompts: 2}\nrepeats: 1\n"
    )
    runner = api.prepare_run(tmp_path / "m.yaml", tmp_path / "run")
    runner.store.close()
    stored = argstore.read(tmp_path / "run")
    assert stored is not None and stored.table == LLAMA
