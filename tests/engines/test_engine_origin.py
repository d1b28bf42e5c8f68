"""An engine is one module (issue 42): what every other package used to spell out by an engine's
name is asked of the engine class, and every list of engines derives from the one registry."""

from __future__ import annotations

import ast
import asyncio
import typing
from pathlib import Path
from typing import Any

import pytest

from specbench.engines import DEFAULT_ENGINE, ENGINES, kinds, theory_priors
from specbench.engines.openai import UNKNOWN, detect_engine
from specbench.engines.tuning import candidate_args
from specbench.errors import ConfigError
from specbench.matrix.config import Matrix
from specbench.run.prepare import make_engine
from tests.fakes.common import Request, Response, mock_client, not_found

SRC = Path(__file__).resolve().parents[2] / "src" / "specbench"


def _named_kinds(path: Path) -> set[str]:
    # "imported" also names a record field and a workload: only the other kinds are checked.
    names = set(ENGINES) - {"imported"}
    tree = ast.parse(path.read_text())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names}


def test_no_engine_name_is_spelled_outside_engines() -> None:
    found = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] != "engines" and _named_kinds(p)
    }
    assert sorted(found) == []


def test_the_matrix_engine_field_is_the_registrys_selectable_kinds() -> None:
    assert typing.get_args(Matrix.model_fields["engine"].annotation) == kinds(lambda c: c.selectable)
    assert Matrix(model="m.gguf").engine == DEFAULT_ENGINE
    with pytest.raises(ValueError, match="Input should be"):
        Matrix(engine="imported", model="m")


@pytest.mark.parametrize("kind", [k for k in ENGINES if not ENGINES[k].launches and ENGINES[k].selectable])
def test_an_attach_only_engine_refuses_to_launch_and_needs_no_model(kind: str) -> None:
    matrix = Matrix(engine=kind)
    with pytest.raises(ConfigError, match=f"engine: '{kind}' measures an already running server"):
        make_engine(matrix)


def test_tune_names_the_engines_that_can_tune() -> None:
    assert kinds(lambda c: c.tunable) == ("llamacpp", "vllm")
    with pytest.raises(ConfigError, match=r"has no tuning support yet \(llamacpp, vllm\)"):
        candidate_args("sglang", {"method": "ngram"})


def test_each_modelled_engine_declares_its_theory_terms_and_the_registry_hands_them_on() -> None:
    priors = theory_priors()
    assert tuple(t.kind for t in priors.engines) == kinds(lambda c: c.modelled_by_theory)
    for kind, cls in ENGINES.items():
        terms = cls.theory_terms()
        assert (terms is not None) == cls.modelled_by_theory
        if terms is not None:
            assert (terms.kind, terms.name) == (kind, cls.display_name) and priors.named(kind) == terms
    # one module an engine in engines/measured/, named by its kind, and none for another
    modules = {p.stem for p in (SRC / "engines" / "measured").glob("*.py")} - {"__init__"}
    assert modules == set(kinds(lambda c: c.modelled_by_theory))
    # every named cost and curve says where it came from
    assert all(c.fitted_on and c.label for c in priors.host_costs)
    assert all(c.where and c.source for c in priors.curves)
    # an engine the theory does not model is known by its name alone, as before
    assert priors.named("openai").name == "openai" and not priors.named("openai").host_costs


def test_the_theorys_engine_facts_are_the_engines() -> None:
    llamacpp, vllm, sglang = (theory_priors().named(k) for k in ("llamacpp", "vllm", "sglang"))
    assert llamacpp.state_moves == (6.0, 3.0) and llamacpp.replays_prefix and not llamacpp.catchup_drafts
    assert vllm.catchup_drafts and sglang.catchup_drafts and vllm.state_moves is sglang.state_moves is None
    assert [c.method for c in vllm.host_costs] == ["eagle3"] and not sglang.host_costs and not vllm.curves


def _detect(answers: dict[str, Any]) -> tuple[str, list[str]]:
    asked: list[str] = []

    def handler(request: Request) -> Response:
        asked.append(request.url.path)
        body = answers.get(request.url.path)
        return Response(200, json=body) if body is not None else not_found()

    async def go() -> str:
        async with mock_client(handler) as client:
            return await detect_engine("http://fake/", client)

    return asyncio.run(go()), asked


def test_signs_are_read_most_specific_first_and_each_endpoint_asked_once() -> None:
    # SGLang's internal_states outranks vLLM's vllm_config in the same answer, whatever the
    # registry's order; /server_info is asked once for both engines' signs.
    kind, asked = _detect({"/server_info": {"internal_states": [], "vllm_config": {}}})
    assert kind == "sglang" and asked.count("/server_info") == 1
    kind, asked = _detect({"/version": {"version": "0.9"}})
    assert kind == "vllm"
    assert asked == ["/metrics", "/v1/models", "/server_info", "/get_server_info", "/props", "/version"]
    assert _detect({})[0] == UNKNOWN


def test_llamacpp_states_its_version_in_props() -> None:
    def handler(request: Request) -> Response:
        if request.url.path == "/props":
            return Response(200, json={"build_info": "b4321-abc123"})
        return not_found()

    async def go() -> dict[str, Any]:
        async with mock_client(handler) as client:
            return await ENGINES["llamacpp"].stated_version(client, "http://fake")

    assert asyncio.run(go()) == {
        "version": "b4321-abc123",
        "build_info": "b4321-abc123",
        "commit": "abc123",
        "build_number": 4321,
    }
