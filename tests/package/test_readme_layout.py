"""The README's "Layout" section matches the tree (issue 18, done when): every top-level module
and package under src/specbench has its line, every module the section names exists, and the
packages whose modules it lists one by one (analysis/, engines/, cli/, executors/) miss none."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

SRC = ROOT / "src" / "specbench"
#: Packages whose lines name each module; the others (report/, theory/, ...) get one line.
LISTED = ("analysis", "engines", "cli", "executors", "matrix", "run", "client", "store", "tune")


def _layout() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"^## Layout\n\n```\n(.*?)^```", readme, re.S | re.M)
    assert found, "README.md has no Layout code block"
    return found.group(1)


def _named(block: str) -> set[str]:
    """Modules named anywhere in the block; packages only where a line starts with one."""
    return set(re.findall(r"(?<![\w/])\w+\.py", block)) | set(re.findall(r"^ {2}(\w+/)", block, re.M))


def test_every_top_level_module_and_package_has_a_line() -> None:
    named = _named(_layout())
    modules = {p.name for p in SRC.glob("*.py")}
    packages = {f"{p.name}/" for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert sorted((modules | packages) - named) == []


def test_every_module_the_layout_names_exists() -> None:
    existing = {p.name for p in SRC.rglob("*.py")} | {f"{p.name}/" for p in SRC.rglob("*") if p.is_dir()}
    assert sorted(_named(_layout()) - existing) == []


def test_the_packages_listed_module_by_module_miss_none() -> None:
    named = _named(_layout())
    missing = [
        f"{pkg}/{p.name}"
        for pkg in LISTED
        for p in (SRC / pkg).glob("*.py")
        if p.name != "__init__.py" and p.name not in named and not p.name.startswith("_ray_")
    ]
    assert missing == []
