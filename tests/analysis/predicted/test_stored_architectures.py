"""The models' shapes are stored with the run (``architectures.json``), so the theory section is
recomputed from the run directory alone, after the model files are gone or replaced (issue 31).
The theory runs are SYNTHETIC (tests/support/synth.py) on a fixed fake CPU; the stored header test
reads a real lab GGUF from the shared cache and is skipped where none was built."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from specbench import api
from specbench.analysis.predicted.arms import run_theory
from specbench.analysis.predicted.models import model_from_run, run_architectures
from specbench.analysis.predicted.stored import ARCH_FILE, read_stored
from specbench.engines import helptext
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.theory.gguf_header import architecture_from_gguf
from specbench.theory.hardware import Gpu
from tests.support.argtable import fake_llama_server
from tests.support.synth import SPEC_ARGS, Arm, Plan, make_run, spec

FAKE_CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=1.0, memory_gb=32.0, unified=True, host_link_gbs=20.0)
CONFIG = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "vocab_size": 1000}
LAB = sorted(Path.home().glob(".cache/specbench/lab/*tiny*/target.gguf"))


@pytest.fixture(autouse=True)
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)


def _hf_model(folder: Path, name: str, layers: int) -> str:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        json.dumps({**CONFIG, "num_hidden_layers": layers, "intermediate_size": 512})
    )
    return str(folder / name)


def _point_run_at(run: Path, model: str, draft: str) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    matrix = manifest["matrix"]
    matrix["model"] = model
    for arm, argv in matrix["arms"].items():
        matrix["arms"][arm] = [draft if a == SPEC_ARGS[1] else a for a in argv]
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_the_stored_shapes_are_used_when_the_model_files_are_gone(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", Plan(arms={"baseline": Arm(), "fast": spec(30, acceptance=0.6)}))
    model = _hf_model(tmp_path / "models" / "target", "tiny-Q8_0.gguf", layers=4)
    draft = _hf_model(tmp_path / "models" / "draft", "small-Q8_0.gguf", layers=2)
    _point_run_at(run, model, draft)
    arms = [[*SPEC_ARGS[:1], draft, *SPEC_ARGS[2:]], []]
    (run / ARCH_FILE).write_text(json.dumps(run_architectures(model, arms, LlamaCppEngine())))
    shutil.rmtree(tmp_path / "models")  # the report is rendered after the models were deleted

    models = model_from_run(run)
    assert models is not None and models.target.arch.layers == 4 and models.target.quant == "Q8_0"
    assert models.source == "config.json (stored with the run)"
    fast = {a.arm: a for a in run_theory(run).arms}["fast"]
    assert fast.reason is None and fast.predicted_speedup > 0  # the draft's shape came from the run too


def test_a_run_without_the_file_still_reads_the_model(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", Plan(arms={"baseline": Arm()}))
    model = _hf_model(tmp_path / "hf", "tiny-Q8_0.gguf", layers=4)
    _point_run_at(run, model, model)
    models = model_from_run(run)
    assert models is not None and models.source.startswith("config.json (")
    assert read_stored(run, model) is None


@pytest.mark.skipif(not LAB, reason="no lab model in ~/.cache/specbench/lab (make lab-models)")
def test_a_new_run_stores_the_gguf_headers_of_its_target_and_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    helptext.cached_help_text.cache_clear()
    target, draft = tmp_path / "m.gguf", tmp_path / "d.gguf"
    shutil.copy(LAB[0], target)
    shutil.copy(LAB[0].parent / "draft.gguf", draft)
    binary = fake_llama_server(tmp_path)
    (tmp_path / "m.yaml").write_text(
        f"model: m.gguf\nengine_binary: {binary}\n"
        f"arms:\n  baseline: []\n  draft: [-md, {draft}, --spec-type, draft-simple]\n"
        "workload: {suite: natural, max_tokens: 16, prompts: 2}\nrepeats: 1\n"
    )
    runner = api.prepare_run(tmp_path / "m.yaml", tmp_path / "run")
    runner.store.close()

    stored = json.loads((tmp_path / "run" / ARCH_FILE).read_text())
    assert stored[str(draft)] == {
        "source": "GGUF header",
        "architecture": asdict(architecture_from_gguf(draft)),
        "bytes": draft.stat().st_size,
        "hf_dtype": None,
    }
    (model,) = set(stored) - {str(draft)}
    entry = read_stored(tmp_path / "run", model)
    assert entry is not None and entry.arch == architecture_from_gguf(target)
