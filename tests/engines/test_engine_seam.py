"""The engine seam (issue 18 item 1, issue 15 item 3): one registry, and one answer per engine to
"does this arm speculate, and with which method?" that checks, report and theory all share.

No engine runs here: the flags are the argv each engine's own parser takes (vLLM
``vllm/engine/arg_utils.py`` ``add_argument("--speculative-config", "-sc", ...)`` with the keys of
``vllm/config/speculative.py``; SGLang ``python/sglang/srt/server_args.py``
``--speculative-algorithm`` / ``--speculative-draft-model-path`` / ``--speculative-num-draft-tokens``).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from specbench.analysis.predicted.models import arm_method
from specbench.analysis.rundata import RunData
from specbench.engines import ENGINES, engine_for, read_record, request_counts
from specbench.engines.base import Engine
from specbench.engines.openai import AttachedEngine
from specbench.errors import ConfigError
from specbench.store.record import ServerCounts

NGRAM_JSON = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5})
EAGLE3_JSON = json.dumps({"method": "eagle3", "num_speculative_tokens": 5})
SGLANG_EAGLE3 = (
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3-head",
    "--speculative-num-draft-tokens", "4",
)  # fmt: skip

#: (engine, argv, method the theory models or None when the arm does not speculate, K).
ARMS: list[tuple[str, tuple[str, ...], str | None, int | None]] = [
    ("llamacpp", ("-md", "d.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"), "draft", 8),
    ("llamacpp", ("--spec-type", "ngram-mod"), "ngram", 64),
    ("llamacpp", ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "12"), "ngram", 12),
    ("llamacpp", ("--spec-type", "draft-mtp", "--spec-draft-n-max", "2"), "mtp", 2),
    ("llamacpp", ("--spec-type=ngram-mod",), "ngram", 64),
    ("llamacpp", ("--spec-type", "none"), None, None),
    ("llamacpp", ("-md", "d.gguf"), "draft", 3),  # configured, though llama.cpp will not run it (plan warns)
    ("llamacpp", ("-md", "d.gguf", "--spec-type", "none"), "draft", 3),
    ("llamacpp", ("--spec-type", "suffix-tree"), "suffix-tree", 3),  # a method the theory cannot model
    ("llamacpp", ("-c", "4096"), None, None),
    ("vllm", ("--speculative-config", EAGLE3_JSON), "eagle3", 5),
    ("vllm", ("--speculative-config", NGRAM_JSON), "ngram", 4),
    ("vllm", ("-sc", NGRAM_JSON), "ngram", 4),
    ("vllm", (f"--speculative-config={NGRAM_JSON}",), "ngram", 4),
    ("vllm", ("--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "3"),
     "ngram", 3),
    ("vllm", ("-sc", json.dumps({"model": "/models/draft", "num_speculative_tokens": 2})), "draft", 2),
    ("vllm", ("-sc", json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 1})), "mtp", 1),
    ("vllm", ("-sc", json.dumps({"method": "suffix"})), "suffix", None),
    ("vllm", ("--per-request-spec-decode-metrics", "summary"), None, None),
    ("vllm", ("--max-model-len", "4096"), None, None),
    ("sglang", SGLANG_EAGLE3, "eagle3", 3),
    ("sglang", ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1"), "mtp", 1),
    ("sglang", ("--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/m/d"),
     "draft", None),
    ("sglang", ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"), "ngram", 7),
    ("sglang", ("--mem-fraction-static", "0.8"), None, None),
    ("imported", ("--spec-imported", "declared"), "unknown", None),
    ("imported", (), None, None),
]  # fmt: skip


def test_every_engine_kind_is_in_the_one_registry() -> None:
    assert {"llamacpp", "vllm", "sglang", "openai", "imported"} <= set(ENGINES)
    for kind, cls in ENGINES.items():
        assert isinstance(engine_for(kind), cls) and engine_for(kind).kind == kind
    with pytest.raises(ConfigError, match="unknown engine 'tgi'"):
        engine_for("tgi")


@pytest.mark.parametrize(("kind", "argv", "method", "k"), ARMS)
def test_the_engine_reads_method_and_k_from_its_own_flags(
    kind: str, argv: tuple[str, ...], method: str | None, k: int | None
) -> None:
    engine = engine_for(kind)
    spec = engine.speculation(argv)
    assert engine.speculates(argv) == (spec is not None) == (method is not None)
    if spec is not None:
        assert (spec.method, spec.k) == (method, k)
        assert (spec.draft_model is not None) == (method == "draft")


def _run(kind: str, arms: dict[str, tuple[str, ...]]) -> RunData:
    matrix = {"engine": kind, "model": "m", "common_args": [], "arms": arms, "baseline": "baseline"}
    return RunData(manifest={"matrix": matrix}, records=[], cells=[], df=pd.DataFrame())


def _theory_says_it_speculates(argv: list[str], engine: Engine) -> bool:
    try:
        return arm_method(argv, engine) is not None
    except ConfigError as err:  # recognised as speculating, with a method it has no model for
        assert "no model for this method" in str(err)
        return True


@pytest.mark.parametrize("kind", sorted({kind for kind, *_ in ARMS}))
def test_theory_checks_and_report_agree_on_which_arms_speculate(kind: str) -> None:
    """Issue 18: the theory parsed flags on its own and called an SGLang EAGLE-3 arm and a vLLM
    ``-sc`` arm non-speculating while the checks flagged them; now all three ask the run's engine."""
    arms = {f"arm{i}": argv for i, (k, argv, _, _) in enumerate(ARMS) if k == kind}
    run = _run(kind, {"baseline": (), **arms})
    for arm in arms:
        args = run.arm_args(arm)
        report = run.speculates(arm)  # what the report's acceptance tables and plots ask
        assert run.engine.speculates(args) == report
        assert _theory_says_it_speculates(args, run.engine) == report, (arm, args)


def test_the_theory_models_an_sglang_eagle3_arm_and_a_vllm_sc_arm() -> None:
    eagle3 = arm_method(list(SGLANG_EAGLE3), engine_for("sglang"))
    assert eagle3 is not None and (eagle3.method, eagle3.draft_max, eagle3.label) == ("eagle3", 3, "EAGLE3")
    ngram = arm_method(["-sc", NGRAM_JSON], engine_for("vllm"))
    assert ngram is not None and (ngram.method, ngram.draft_max, ngram.draft_path) == ("ngram", 4, None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("-sc", "{not json"), "is not JSON"),
        (("-sc", "[1, 2]"), "must be a JSON object"),
        (("-sc", json.dumps({"method": "ngram", "num_speculative_tokens": "four"})), "not an integer"),
    ],
)
def test_a_speculative_config_vllm_would_refuse_names_the_flag(argv: tuple[str, ...], message: str) -> None:
    engine = engine_for("vllm")
    assert engine.speculates(argv)  # the checks still see a speculative arm
    with pytest.raises(ConfigError, match=message):
        engine.speculation(argv)


def test_an_attached_server_is_read_by_the_engine_it_was_detected_as() -> None:
    sglang = AttachedEngine(engine="sglang")
    off = [{"speculative": {"speculative_algorithm": None}}]
    assert sglang.server_says_off(off) == ["the server info says speculative_algorithm is None"]
    assert engine_for("openai").server_says_off(off) == []  # unknown engine: no word from the server
    spec = sglang.speculation(SGLANG_EAGLE3)
    assert spec is not None and spec.method == "eagle3"


@pytest.mark.parametrize(
    ("record", "counts"),
    [
        (
            {"timings": {"draft_n": 12, "draft_n_accepted": 9, "prompt_n": 30, "cache_n": 2,
                         "prompt_ms": 15.0, "predicted_n": 40, "predicted_ms": 390.0,
                         "predicted_per_second": 100.0}},
            ServerCounts(drafted=12.0, accepted=9.0, output_tokens=40.0, prompt_processed=30.0,
                         cached_tokens=2.0, prefill_ms=15.0, decode_ms=390.0, decode_tok_s=100.0),
        ),
        ({"timings": {"predicted_n": 40}}, ServerCounts(drafted=0.0, accepted=0.0, output_tokens=40.0)),
        (
            {"metrics": {"speculative_decoding": {"num_draft_tokens": 8, "num_accepted_draft_tokens": 5,
                                                  "num_spec_steps": 3}}},
            ServerCounts(drafted=8.0, accepted=5.0, rounds=3.0),
        ),
        ({"metrics": {"mean_itl_ms": 4.0}}, ServerCounts(decode_tok_s=250.0)),
        ({"usage": {"completion_tokens": 40}}, None),
    ],
)  # fmt: skip
def test_per_request_counts_come_engine_neutral_from_the_engine_whose_fields_the_record_holds(
    record: dict[str, Any], counts: ServerCounts | None
) -> None:
    assert request_counts(record) == counts
    read = read_record({"arm": "a", "prompt_id": "p", "repeat": 0, **record})
    assert read.counts == (counts or ServerCounts()) and read.line["arm"] == "a"


def test_an_engine_that_reads_per_request_fields_names_them() -> None:
    """request_counts asks only the engines whose response_fields a record holds: an engine
    reads per-request fields only if it names them (or reads them as a registered one does)."""
    asked = {cls.request_counts for cls in ENGINES.values() if cls.response_fields}
    for cls in ENGINES.values():
        assert cls.request_counts is Engine.request_counts or cls.request_counts in asked, cls.kind


@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_every_engine_answers_for_its_argument_table_without_failing(
    kind: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing built, nothing installed: no table, no error, and so no flag is refused."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("SPECBENCH_LLAMA_SERVER", "SPECBENCH_VLLM"):
        monkeypatch.delenv(name, raising=False)
    engine = engine_for(kind)
    assert engine.arg_table() is None
    assert engine.reported_settings({"arm": "a", "server": {}, "log_lines": []}) == {}
