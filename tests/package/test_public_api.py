"""The package's public surface and its import graph (issue 18: seams)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import specbench
from tests.support.paths import ROOT

SRC = Path(specbench.__file__).parent


def test_all_is_the_documented_api_and_every_name_resolves() -> None:
    assert specbench.__all__ == [
        "SCHEMA_VERSION", "__version__", "run_matrix", "prepare_run", "plan_run", "tune", "load_run",
        "comparisons", "findings", "decision_table", "Analysis", "analyse", "render_report", "load_matrix",
        "SpecbenchError",
    ]  # fmt: skip
    for name in specbench.__all__:
        assert getattr(specbench, name) is not None


# What ``specbench run`` loads before the first engine starts, and ``--help``: none of these may
# pay for the analysis stack (a theory/__init__ that imported its model eagerly loaded SciPy
# into the runner through store/machineprobe -> theory.hardware).
LIGHT = ["specbench", "specbench.run.runner", "specbench.store.machineprobe"]


@pytest.mark.parametrize("module", LIGHT)
def test_importing_a_light_entry_point_loads_no_heavy_dependency(module: str) -> None:
    heavy = "('pandas', 'scipy', 'matplotlib')"
    code = f"import sys, {module}; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reading_a_runs_models_loads_no_finding_and_the_predicted_names_resolve() -> None:
    """``run.prepare`` reads a run's models through analysis.predicted.models: importing it must
    not load the findings (analysis.findings: SciPy) through the package; the package's names
    still resolve, each on first use (``predict --calibrate`` reads two of them)."""
    loaded = "'specbench.analysis.findings.judge' in sys.modules"
    code = f"import sys, specbench.analysis.predicted.models; print({loaded})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    import specbench.analysis.predicted as predicted

    for name in predicted.__all__:
        assert getattr(predicted, name) is not None


def test_the_theory_package_resolves_every_name_lazily() -> None:
    import specbench.theory as theory
    import specbench.theory.speedup  # the module that defines predict() no longer shares its name

    for name in theory.__all__:
        assert getattr(theory, name) is not None
    assert theory.predict is specbench.theory.speedup.predict


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, modules: set[str]) -> set[str]:
    """specbench modules imported when ``path`` is imported (not inside functions or TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node):
            ours = (sub.module or "").startswith("specbench") if isinstance(sub, ast.ImportFrom) else False
            if isinstance(sub, ast.ImportFrom) and sub.level == 0 and ours:
                named = [f"{sub.module}.{a.name}" for a in sub.names if f"{sub.module}.{a.name}" in modules]
                found.update(named)
                if len(named) < len(sub.names):
                    found.add(str(sub.module))
            elif isinstance(sub, ast.Import):
                found.update(a.name for a in sub.names if a.name in modules)
    return found


def test_no_import_cycle_between_modules() -> None:
    files = {_module(p): p for p in SRC.rglob("*.py")}
    graph = {m: _top_level_imports(p, set(files)) - {m} for m, p in files.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == [], cycles


def test_no_module_imports_a_private_name_of_another() -> None:
    """A name a test or another module needs is public (issue 30: one seam, not a back door)."""
    found = []
    for folder in ("src", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specbench"):
                    private = [
                        a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                    ]
                    found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{n}" for n in private]
    assert found == []


def test_no_tracked_file_points_outside_the_repository() -> None:
    """The reference notes the developers used are not shipped: no source, doc, test or report
    caption may send a user to them (docs/mistakes.md states the facts in the project's words)."""
    root = ROOT
    needle = "shared/" + "reference"  # split, so this file does not match itself
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    found = subprocess.run(
        ["git", "grep", "-n", needle], cwd=root, capture_output=True, text=True, check=False
    ).stdout
    assert found == ""
