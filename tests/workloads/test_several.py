"""A matrix with several workloads (issue 22, item 4): validation, and requests that carry their
workload, unique ids and their own concurrency."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specbench.errors import ConfigError
from specbench.matrix.config import Matrix, plan_cells
from specbench.matrix.load import load_matrix
from specbench.run.plan import make_plan
from specbench.workloads.suites import build_requests

BASE = {"engine": "openai", "repeats": 1, "warmup": 1}


def load(tmp_path: Path, **fields: object) -> Matrix:
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(BASE | fields))
    return load_matrix(path)


def test_requests_carry_their_workload_and_run_as_their_own_phase(tmp_path: Path) -> None:
    matrix = load(
        tmp_path,
        workloads=[
            {"suite": "natural", "prompts": 3, "max_tokens": 8},
            {"suite": "chat", "name": "chat-short", "prompts": 2, "scale": 0.05},
        ],
    )
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    natural = [r for r in requests if r.workload == "natural"]
    chat = [r for r in requests if r.workload == "chat-short"]
    assert len(natural) == 3 and len(chat) == 2 and len(requests) == 5
    assert all(r.prompt_id.startswith("natural/") and r.phase == "natural/main" for r in natural)
    assert all(r.prompt_id.startswith("chat-short/") and r.phase == "chat-short/main" for r in chat)
    assert {r.concurrency for r in natural} == {1} and {r.concurrency for r in chat} == {2}
    assert {r.max_tokens for r in natural} == {8} and len(warmup) == 1 and concurrency == 1
    cells = plan_cells(matrix, requests, warmup, concurrency)
    assert cells[0].workload == "natural+chat-short"
    plan = make_plan(matrix, cells, tmp_path / "run", probe=False)
    assert plan.workloads == {"natural": (3, 1), "chat-short": (2, 2)}
    assert "workloads (2, one after the other in each launch): natural 3 requests, 1 in flight; " in "".join(
        plan.lines()
    )


def test_one_workload_keeps_its_plain_ids(tmp_path: Path) -> None:
    matrix = load(tmp_path, workload={"suite": "natural", "prompts": 2})
    requests, _, _ = build_requests(matrix, tmp_path)
    assert all("/" not in r.prompt_id and r.workload == "natural" and r.phase == "main" for r in requests)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workload": {"suite": "natural"}, "workloads": [{"suite": "single"}]}, "workload and workloads"),
        ({"workloads": [{"suite": "natural"}, {"suite": "natural"}]}, r"\['natural'\] named more than once"),
        ({"workloads": [{"suite": "natural", "name": "a b"}]}, "workload names may use letters"),
        ({"workloads": [{"suite": "natural", "sute": 1}]}, r"workloads.0.sute: unknown field \(known: "),
    ],
)
def test_bad_workload_lists_are_one_line_errors(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load(tmp_path, **fields)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(tmp_path / "matrix.yaml"))


def test_an_unknown_suite_names_its_list_entry(tmp_path: Path) -> None:
    matrix = load(tmp_path, workloads=[{"suite": "natural"}, {"suite": "nope"}])
    with pytest.raises(ConfigError, match=r"^workloads.1.suite: unknown suite 'nope'"):
        build_requests(matrix, tmp_path)
