"""The report reads well (SYNTHETIC runs): alignment by column, boxes that suit their point
count, one title per plot, CJK glyphs in plots, the workload in words, no-win decisions in words."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.lines import Line2D

from specbench import analysis
from specbench.analysis.result import analyse
from specbench.analysis.stats import median_ci
from specbench.report import fonts, plots
from specbench.report.envfile import describe_workload
from specbench.report.page import html, markdown
from specbench.report.page.document import Table, is_number, numeric_columns
from tests.support.synth import CJK_CATEGORY


@pytest.mark.parametrize("cell", ["24", "1.42×", "45 %", "30.1 (29.0–31.2)", "200 → 1000", "-3", 0.5, 7])
def test_numbers_are_recognised(cell: object) -> None:
    assert is_number(cell)


@pytest.mark.parametrize(
    "cell", ["ngram-mod", "faster", "no difference", "ACCEPTANCE_ARTEFACT", "8 / 8 a", True]
)
def test_text_is_not_a_number(cell: object) -> None:
    assert not is_number(cell)


def test_columns_align_by_kind_headers_included() -> None:
    frame = pd.DataFrame(
        {"arm": ["a", "b"], "n": [24, 24], "speedup": ["1.42×", "—"], "evidence": ["x y z", "1 2 3 abc"]}
    )
    assert numeric_columns(frame) == [False, True, True, False]
    page = html.table(Table(frame))
    assert '<th class="num">n</th>' in page and "<th>evidence</th>" in page and "<th>arm</th>" in page
    assert '<td class="num">1.42×</td>' in page and "<td>x y z</td>" in page
    md = markdown.table(Table(frame))
    assert md.splitlines()[1] == "|:---|---:|---:|:---|"


def test_findings_and_evidence_header_are_left_aligned(three_arms: Path) -> None:
    page = (three_arms / "report" / "report.html").read_text()
    assert "<th>severity</th><th>code</th><th>arms</th><th>evidence</th>" in page
    assert "<th>item</th><th>value</th>" in page  # the environment tables


def _boxes(ax: object) -> list[Line2D]:
    # a plain box is a 5-vertex line, a notched one an 11-vertex line
    return [ln for ln in ax.lines if len(ln.get_xdata()) in (5, 11)]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("n", "box", "notched"), [(3, False, False), (6, True, False), (40, True, True)])
def test_box_suits_the_number_of_points(n: int, box: bool, notched: bool) -> None:
    fig = plots.new_figure(4, 3)
    ax = fig.add_subplot()
    d = np.random.default_rng(0).normal(30, 1, n)
    plots.draw_box(ax, 1, d, median_ci(d))
    lines = _boxes(ax)
    assert bool(lines) == box
    assert any(len(ln.get_xdata()) == 11 for ln in lines) == notched


def test_three_points_draw_a_median_bar_not_a_bow_tie() -> None:
    fig = plots.new_figure(4, 3)
    ax = fig.add_subplot()
    d = np.array([29.0, 30.0, 35.0])
    plots.draw_box(ax, 1, d, median_ci(d))
    assert not _boxes(ax) and len(ax.collections) == 1  # the hlines at the median
    assert ax.collections[0].get_segments()[0][0][1] == 30.0


def test_each_plot_has_one_title(three_arms: Path) -> None:
    run = analysis.load_run(three_arms)
    result = analyse(run, three_arms)
    fig = plots.decode_distribution(result)
    assert fig is not None and [ax.get_title() for ax in fig.axes] == [""]
    # facets carry only their value; the figure title is added once, by write_plots
    facets = plots.decode_by_category(result)
    assert facets is not None and sorted(ax.get_title() for ax in facets.axes) == [
        "chat",
        "code",
        "reasoning",
    ]


@pytest.mark.skipif(
    fonts.cjk_family() is None, reason="no CJK font installed (apt-get install fonts-noto-cjk)"
)
def test_cjk_category_draws_without_missing_glyphs(demo_like: Path, tmp_path: Path) -> None:
    run = analysis.load_run(demo_like)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font.*")
        written = plots.write_plots(analyse(run, demo_like), tmp_path)
    assert any(p.name == "decode_by_category.png" for _, p in written)
    assert "Noto Sans CJK" in " ".join(fonts.families()) or len(fonts.families()) == 2


def test_without_a_cjk_font_the_report_says_so(demo_like: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench.report import sections

    monkeypatch.setattr(fonts, "cjk_family", lambda: None)
    (note,) = sections.font_note(analysis.load_run(demo_like))
    assert "fonts-noto-cjk" in note.text  # type: ignore[union-attr]


def test_workload_in_words() -> None:
    matrix = {"suite": "natural", "max_tokens": 200, "temperature": 0.0, "prompts": 8}
    words = describe_workload(matrix | {"categories": ["chat", "code"], "ignore_eos": None, "extra_body": {}})
    assert words == "suite natural: 8 prompts, categories chat, code, up to 200 output tokens, temperature 0"
    assert describe_workload({}) == "suite single"


def test_demo_like_report_reads_well(demo_like: Path) -> None:
    md = (demo_like / "report" / "report.md").read_text()
    page = (demo_like / "report" / "report.html").read_text()
    for text in (md, page):
        assert "baseline baseline" not in text and "best:" not in text
    words = "suite natural: up to 128 output tokens, temperature 0"
    assert f"Workload: {words}." in md and f"<td>workload</td><td>{words}</td>" in page
    assert "keep speculation off" in md and "every arm decodes slower" in md
    assert CJK_CATEGORY in page


def test_finding_counts_read_as_english(three_arms: Path) -> None:
    md = (three_arms / "report" / "report.md").read_text()
    # counted most serious first; a slowdown whose whole CI is below ×0.8 is an error
    assert "1 error, 2 warnings; most serious first." in md
