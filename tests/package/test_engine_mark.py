"""``make unit`` (``pytest -m "not engine"``) starts no engine: every test that asks for an engine
fixture, directly or through another fixture, is marked ``engine`` by the root conftest's
collection hook, whether or not its file says so (issue 30: two dry-run tests and the prompt
endpoint tests asked for ``llama_server`` unmarked, so a unit run could start a 15-minute build)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.paths import ROOT


def _selected(pytester: pytest.Pytester, *args: str) -> list[pytest.Item]:
    """The items a collection keeps after ``-m`` (``inline_genitems`` lists them before it)."""
    recorded = pytester.inline_run("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    items: list[pytest.Item] = recorded.getcall("pytest_collection_finish").session.items
    return items


#: A plugin for the whole-suite collection below: it writes every kept test that asks for an
#: engine fixture. The collection runs in a child process because an in-process one
#: (``inline_run``) unloads numpy afterwards, and numpy cannot be loaded twice in one process.
_PROBE = """
import json, os
from tests.support.marks import ENGINE_FIXTURES

def pytest_collection_finish(session):
    asking = [i.nodeid for i in session.items if ENGINE_FIXTURES & set(getattr(i, "fixturenames", ()))]
    with open(os.environ["ENGINE_PROBE_OUT"], "w") as out:
        json.dump({"kept": len(session.items), "asking": asking}, out)
"""


def test_no_test_left_by_not_engine_asks_for_an_engine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(engine_probe=_PROBE)
    out = pytester.path / "probe.json"
    monkeypatch.setenv("ENGINE_PROBE_OUT", str(out))
    paths = [str(pytester.path), str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    args = ("--collect-only", "-q", "-p", "no:cacheprovider", "-p", "engine_probe", "-m", "not engine")
    pytester.runpytest_subprocess(str(ROOT / "tests"), *args)
    seen = json.loads(out.read_text())
    assert seen["kept"] > 1000  # the whole suite was collected
    assert seen["asking"] == []


def test_a_fixture_that_uses_the_engine_marks_its_tests(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from tests.support.marks import mark_engine_tests

        def pytest_collection_modifyitems(items):
            mark_engine_tests(items)

        @pytest.fixture
        def llama_server():
            raise AssertionError("collection only")

        @pytest.fixture
        def served(llama_server):
            return llama_server
        """
    )
    pytester.makepyfile(
        "def test_direct(llama_server): pass\ndef test_through(served): pass\ndef test_none(): pass"
    )
    items = _selected(pytester, "-m", "not engine")
    assert [item.name for item in items] == ["test_none"]
