"""Every finding code is an enum member of one family in analysis/findings/, with a severity and a
section of docs/checks.md (issue 42.2: a finding is one module)."""

from __future__ import annotations

import re

from specbench.analysis.findings.judge import FAMILIES
from tests.support.paths import ROOT

CHECKS_MD = (ROOT / "docs" / "checks.md").read_text()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_each_family_declares_a_severity_for_each_of_its_codes_and_a_section_that_exists() -> None:
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", CHECKS_MD, re.M)}
    for family in FAMILIES:
        assert set(family.severity) == set(family.codes), family.codes
        assert family.anchor in anchors, family.docs


def test_no_code_is_declared_twice_and_docs_give_each_its_rule() -> None:
    codes = [str(code) for family in FAMILIES for code in family.codes]
    assert len(codes) == len(set(codes))
    for code in codes:
        assert code == code.upper() and f"- `{code}` —" in CHECKS_MD, code


def test_no_finding_code_is_a_bare_string_in_the_analysis() -> None:
    """Codes are written as enum members; a quoted code appears only where its enum declares it."""
    codes = {str(code) for family in FAMILIES for code in family.codes}
    src = ROOT / "src" / "specbench" / "analysis"
    for path in src.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for code in codes:
                if f'"{code}"' in line:
                    assert line.strip() == f'{code} = "{code}"', f"{path}:{n}: {line.strip()}"
