"""The generic engine: any OpenAI-compatible server, attached and measured as one, with nothing
engine-specific asked of it or sent to it (a FAKE vLLM plays the server: it would be detected as
vLLM, so what the generic engine does not do shows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specbench import api
from specbench.analysis import load_run
from specbench.engines import ENGINES, engine_for, kinds
from specbench.engines.generic import GenericEngine
from specbench.errors import ConfigError
from specbench.matrix.config import Matrix
from specbench.run.prepare import make_engine
from tests.fakes import fake_vllm as fv
from tests.fakes.common import Request, Response, serve
from tests.support.matrices import SHORT_PROMPTS


def test_the_registry_lists_it_as_an_attach_only_engine_a_matrix_may_name() -> None:
    assert ENGINES["generic"] is GenericEngine
    assert "generic" in kinds(lambda c: c.selectable)
    assert "generic" not in kinds(lambda c: c.installable or c.tunable or c.modelled_by_theory)
    assert Matrix(engine="generic").model == ""  # no model: the server loaded its own
    with pytest.raises(ConfigError, match="'generic' measures an already running server"):
        make_engine(Matrix(engine="generic"))


def test_it_reads_no_flag_as_speculative_and_sends_nothing_engine_specific() -> None:
    engine = engine_for("generic")
    assert engine.speculation(["--spec-type", "ngram-mod", "--speculative-config", "{}"]) is None
    assert engine.request_extras(ignore_eos=True) == {}
    assert engine.spec_counters({"vllm:spec_decode_num_drafts_total": 3.0}) == {}
    assert engine.command("m", [], "127.0.0.1", 8000) == []


def _matrix(folder: Path) -> Path:
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix = {
        "engine": "generic",
        "workload": {"suite": "natural", "max_tokens": 8, "prompts": 2, "prompt_file": "prompts.jsonl"},
        "repeats": 1,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def test_an_attached_server_is_measured_as_generic(tmp_path: Path) -> None:
    fake, bodies = fv.FakeVllm(), list[dict[str, Any]]()

    def handler(request: Request) -> Response:
        if request.url.path == "/v1/chat/completions":
            bodies.append(json.loads(request.content))
        return fake.handler(request)

    out = tmp_path / "run"
    with serve(handler) as url:
        api.prepare_run(_matrix(tmp_path), out, attach=url, arm="server").run()
    env = json.loads((out / "env.json").read_text())["engine"]
    assert env["kind"] == "generic" and env["version"] == fake.version  # /version, not detected
    run = load_run(out)
    assert run.engine.kind == "generic" and run.arms == ["server"]
    assert bodies and not any({"min_p", "ignore_eos", "repetition_penalty"} & set(b) for b in bodies)
    cells = [c for c in (json.loads(line) for line in (out / "cells.jsonl").read_text().splitlines())]
    assert cells and all(c["server"]["detected_engine"] == "generic" for c in cells)
    assert all(c["metrics_after"]["spec"] == {} for c in cells)  # vLLM's counters are not read
