"""llama-server's own argument table: parsed from its ``--help``, cached once per build, and used
to check a matrix's flags before anything launches.

``data/llama-server-help.txt`` is ``llama-server --help`` of the pinned build (llama-cpp-python
0.3.36, llama.cpp commit 0c1e570), captured from the real binary. The fake binary below prints it,
so these tests need no build; ``test_the_pinned_build_prints_the_stored_help`` (engine mark)
checks that the capture is still what the binary prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.engines import helptext
from specbench.engines.argtable import check_flags, effective, problems
from specbench.engines.helpparse import parse_llama_help
from specbench.engines.helptext import help_text
from specbench.engines.llamacpp import OWN_FLAGS, LlamaCppEngine
from specbench.errors import ConfigError
from tests.support.argtable import calls, fake_llama_server
from tests.support.paths import LLAMA_HELP as HELP

TABLE = parse_llama_help(HELP.read_text())


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPECBENCH_LLAMA_SERVER", raising=False)
    return tmp_path / "cache"


def test_help_gives_aliases_values_negatives_and_choices() -> None:
    assert len(TABLE) > 200 and TABLE.knows(*OWN_FLAGS)
    ctx, _ = TABLE.lookup("-c") or (None, None)
    assert ctx is not None and ctx.canonical == "--ctx-size" and ctx.takes_value
    assert (TABLE.lookup("--threads") or (None,))[0] is (TABLE.lookup("-t") or (None,))[0]
    assert TABLE.lookup("--n-predict") == TABLE.lookup("-n")  # three spellings of one option
    repack, negated = TABLE.lookup("-nr") or (None, None)  # "--repack, -nr, --no-repack"
    assert repack is not None and repack.canonical == "--repack" and negated and not repack.takes_value
    metrics, negated = TABLE.lookup("--metrics") or (None, None)
    assert metrics is not None and not metrics.takes_value and not negated
    spec_type, _ = TABLE.lookup("--spec-type") or (None, None)
    assert spec_type is not None and spec_type.choice_list and "ngram-mod" in spec_type.choices
    assert spec_type.section == "speculative params" and TABLE.is_spec(spec_type)
    fa, _ = TABLE.lookup("-fa") or (None, None)
    assert fa is not None and fa.choices == ("on", "off", "auto") and fa.synonyms["1"] == "on"
    assert TABLE.lookup("--ctx_size") == TABLE.lookup("--ctx-size")  # llama.cpp reads _ as -


def test_effective_settings_fold_aliases_and_the_last_repeat_wins() -> None:
    base = effective(["-c", "2048", "-t", "1", "-fa", "on", "--no-warmup"], TABLE)
    assert base == effective(
        ["--ctx-size", "2048", "-c", "2048", "--threads", "1", "-t", "1", "--flash-attn", "1", "--no-warmup"],
        TABLE,
    )
    assert base == effective(
        ["-c", "4096", "--ctx_size", "2048.0", "-t", "1", "-fa", "enabled", "--no-warmup"], TABLE
    )
    assert base != effective(["-c", "4096", "-t", "1", "-fa", "on", "--no-warmup"], TABLE)
    assert effective(["--warmup"], TABLE) != effective(["--no-warmup"], TABLE)


def test_only_what_llama_server_refuses_is_an_error() -> None:
    fine = ["-c", "2048", "-t", "1", "-fa", "1", "--spec-type", "ngram-mod,draft-simple", "--temp", "-1"]
    assert problems([*fine, "--no-warmup", "-ngl", "-1", "--ctx_size", "512"], TABLE) == []
    (typo,) = problems(["--spec-type", "ngram-mdo"], TABLE)
    assert typo.startswith("--spec-type 'ngram-mdo': not a value llama-server accepts for it (none,")
    assert typo.endswith("did you mean ngram-mod?")
    (unknown,) = problems(["--ctx-sise", "2048"], TABLE)
    assert unknown == (
        "--ctx-sise: not a llama-server flag "
        "(llama-server --help lists no such flag; did you mean --ctx-size?)"
    )
    # llama.cpp looks up the whole argv item: --ctx-size=2048 is "error: invalid argument".
    assert problems(["--ctx-size=2048"], TABLE) == [
        "--ctx-size=2048: llama-server does not read --flag=value; write --ctx-size 2048"
    ]
    assert problems(["--metrics", "1"], TABLE) == [
        "'1': llama-server expects a flag here, not a value (the flag before it takes none, or only one)"
    ]
    assert problems(["-c"], TABLE) == ["-c: needs a value (llama-server --help)"]


def test_check_flags_names_the_arm_and_the_flag() -> None:
    arms = {"baseline": ["-c", "2048"], "ngram": ["--spec-type", "ngram-mdo"]}
    with pytest.raises(ConfigError, match=r"^arm ngram: --spec-type 'ngram-mdo': not a value") as err:
        check_flags(TABLE, ["-t", "1"], arms)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^common_args: --thread: not a llama-server flag"):
        check_flags(TABLE, ["--thread", "1"], arms)
    check_flags(None, ["--anything"], {"a": ["--goes"]})  # no table (engine not built): no check


def test_the_help_is_read_once_per_build_and_kept_beside_it(tmp_path: Path, cache: Path) -> None:
    build = cache / "llama-server" / "0.3.36-cpu"
    (build / "bin").mkdir(parents=True)
    binary = fake_llama_server(build / "bin")
    first = LlamaCppEngine(binary).arg_table()
    assert first is not None and first.knows("--spec-type") and calls(build / "bin") == 1
    assert (build / "specbench-help.json").is_file()
    helptext.cached_help_text.cache_clear()  # a new process: read from the file, not run again
    assert LlamaCppEngine(binary).arg_table() is not None and calls(build / "bin") == 1
    binary.write_text(binary.read_text() + "# rebuilt\n")  # another build: read again
    helptext.cached_help_text.cache_clear()
    assert LlamaCppEngine(binary).arg_table() is not None and calls(build / "bin") == 2


def test_a_help_that_is_not_llama_servers_gives_no_table(tmp_path: Path) -> None:
    """A wrapper script or a fake prints something else: nothing is checked, never a false error."""
    assert LlamaCppEngine(fake_llama_server(tmp_path, "usage: my-wrapper [options]\n")).arg_table() is None
    assert LlamaCppEngine(tmp_path / "missing").arg_table() is None
    refuses = tmp_path / "refuses"
    refuses.mkdir()
    false = refuses / "llama-server"
    false.write_text(f'#!/bin/sh\necho x >> "{refuses}/calls"\nexit 1\n')
    false.chmod(0o755)
    assert LlamaCppEngine(false).arg_table() is None
    helptext.cached_help_text.cache_clear()  # a new process: the refusal is kept, not asked again
    assert LlamaCppEngine(false).arg_table() is None and calls(refuses) == 1


def test_reading_a_run_uses_the_named_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished run is read with the registry's engine (no binary named): the table then comes
    from $SPECBENCH_LLAMA_SERVER or the pinned build, else there is none."""
    monkeypatch.setenv("SPECBENCH_LLAMA_SERVER", str(fake_llama_server(tmp_path)))
    table = LlamaCppEngine().arg_table()
    assert table is not None and table.knows("-md", "--spec-type")


@pytest.mark.engine
def test_the_pinned_build_prints_the_stored_help(llama_server: Path) -> None:
    text = help_text(llama_server, ["--help"], timeout=30.0)
    assert text is not None and parse_llama_help(text) == TABLE


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_a_typo_in_spec_type_fails_the_dry_run_and_the_run_before_any_launch(
    tmp_path: Path, cache: Path
) -> None:
    """Regression (issue 28): `--spec-type ngram-mdo` passed --dry-run and failed only at launch,
    after the baseline cell had run (exit 6)."""
    (tmp_path / "m.gguf").write_bytes(b"\0" * 1024)
    binary = fake_llama_server(tmp_path)
    arms = "  baseline: []\n  ngram: [--spec-type, ngram-mdo]\n"
    (tmp_path / "m.yaml").write_text(
        f"model: m.gguf\nengine_binary: {binary}\ncommon_args: [-c, '2048', -t, '1']\narms:\n{arms}"
        "workload: {suite: natural, max_tokens: 16, prompts: 2}\nrepeats: 1\n"
    )
    env = {"SPECBENCH_CACHE": str(cache)}
    for extra in (["--dry-run"], []):
        done = _cli("run", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "run"), *extra, env=env)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: arm ngram: --spec-type 'ngram-mdo': not a value llama-server accepts")
        assert not (tmp_path / "run").exists() and calls(tmp_path) == 1  # nothing made, nothing launched
    (tmp_path / "m.yaml").write_text((tmp_path / "m.yaml").read_text().replace("ngram-mdo", "ngram-mod"))
    done = _cli("run", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "run"), "--dry-run", env=env)
    assert done.returncode == 0, done.stderr  # the same table finds nothing wrong in a right matrix


def test_a_two_value_option_reads_both_values() -> None:
    """Regression: ``--control-vector-layer-range START END`` (llama.cpp's ``value_hint_2``) was
    read as one value, so its END was refused as "expects a flag here"."""
    assert problems(["--control-vector-layer-range", "10", "20", "-c", "2048"], TABLE) == []
    assert problems(["--control-vector-layer-range", "10"], TABLE) == [
        "--control-vector-layer-range: needs 2 values (llama-server --help)"
    ]
    assert effective(["--control-vector-layer-range", "10", "20.0"], TABLE) == {
        "--control-vector-layer-range": "10 20"
    }
    assert effective(["--control-vector-layer-range", "10", "20"], TABLE) != effective(
        ["--control-vector-layer-range", "10", "21"], TABLE
    )


def test_every_option_of_the_pinned_help_reads_as_many_values_as_its_hint_names() -> None:
    """llama.cpp options take 0, 1 or 2 values, never an optional one (``common_params_parse_ex``:
    ``check_arg`` then ``argv[++i]``); a hint with spaces inside ``<>`` or brackets such as
    ``[on|off]`` or ``[<repo>/]<model>[:quant]`` is one value."""
    counts = {s.canonical: s.nargs for s in TABLE.specs}
    assert {c for c, n in counts.items() if n == 2} == {"--control-vector-layer-range"}
    assert not any(s.optional_value or s.more_values for s in TABLE.specs)
    assert counts["--override-tensor"] == 1  # <tensor name pattern>=<buffer type>,...
    assert counts["--docker-repo"] == counts["--flash-attn"] == counts["--fit"] == 1
    assert counts["--metrics"] == counts["--repack"] == 0


def test_the_table_is_parsed_once_per_help_text(tmp_path: Path) -> None:
    """Every check, plan and run asks ``arg_table()``: the text is parsed once, not on each call."""
    binary = fake_llama_server(tmp_path)
    first = LlamaCppEngine(binary).arg_table()
    assert first is not None and LlamaCppEngine(binary).arg_table() is first
