"""The rendered report in a real headless Chromium (``apt-get install chromium fonts-noto-cjk``;
``make test`` and CI install both).

The report carries no script, so the test adds one to a *copy* of report.html: Chromium lays
the page out, the script reads what a reader would see (computed alignment, loaded images,
drawn glyphs, the visible text) into a ``<pre>``, and ``--dump-dom`` hands the result back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.synth import CJK_CATEGORY

CHROMIUM = next((p for n in ("chromium", "chromium-browser") if (p := shutil.which(n))), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: apt-get install chromium (make test does)"
)

# Reads the laid-out page. A glyph is "drawn" when its canvas pixels differ from those of a
# private-use code point no font covers (the "missing glyph" box).
PROBE = r"""<script>
const NUM = /^[-−+]?(\d[\d,]*(\.\d+)?|\.\d+)(e[-+]?\d+)?[\d.,\s()×%–→+−-]*$/;
const BLANK = new Set(["", "—", "-"]);
const out = {misaligned: [], tables: 0, images: [], captions: [], glyphs: {}};
for (const table of document.querySelectorAll("table")) {
  out.tables++;
  const rows = [...table.rows].map(r => [...r.cells]);
  for (let c = 0; c < rows[0].length; c++) {
    const cells = rows.slice(1).map(r => r[c]).filter(td => td && !BLANK.has(td.textContent.trim()));
    const numeric = cells.length > 0 && cells.every(td => NUM.test(td.textContent.trim()));
    for (const cell of [rows[0][c], ...cells]) {
      const align = getComputedStyle(cell).textAlign;
      const want = numeric ? ["right", "end"] : ["left", "start"];
      if (!want.includes(align)) {
        out.misaligned.push(`${rows[0][c].textContent}: ${cell.textContent} is ${align}`);
      }
    }
  }
}
for (const fig of document.querySelectorAll("figure")) {
  const img = fig.querySelector("img");
  out.images.push([img.alt, img.complete && img.naturalWidth > 0]);
  out.captions.push(fig.querySelector("figcaption").textContent);
}
function pixels(text, font) {
  const canvas = document.createElement("canvas");
  canvas.width = 64; canvas.height = 64;
  const ctx = canvas.getContext("2d");
  ctx.font = `40px ${font}`;
  ctx.fillText(text, 4, 48);
  return Array.from(ctx.getImageData(0, 0, 64, 64).data).join(",");
}
const font = getComputedStyle(document.body).fontFamily;
const missing = pixels("\uE000", font);
for (const ch of new Set(document.body.innerText.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g) || [])) {
  out.glyphs[ch] = pixels(ch, font) !== missing;
}
out.text = document.body.innerText;
const pre = document.createElement("pre");
pre.id = "probe";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def probe(report: Path, tmp_path: Path) -> dict[str, Any]:
    page = tmp_path / "probed.html"
    page.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    argv = [
        *(str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"),
        *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
        *(f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2000", "--dump-dom"),
        page.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    start = done.stdout.find('<pre id="probe">')
    assert start >= 0, f"chromium printed no probe result: {done.stderr[-2000:]}"
    body = done.stdout[start + len('<pre id="probe">') : done.stdout.index("</pre>", start)]
    result: dict[str, Any] = json.loads(body.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    return result


@needs_chromium
def test_demo_like_report_reads_well_in_chromium(demo_like: Path, tmp_path: Path) -> None:
    seen = probe(demo_like / "report" / "report.html", tmp_path)
    assert seen["tables"] >= 8 and seen["misaligned"] == []
    assert seen["images"] and all(loaded for _, loaded in seen["images"])
    # one title per plot: the PNG has it, the caption below does not repeat it
    alts = [alt for alt, _ in seen["images"]]
    assert not any(cap.startswith(alt) for alt, cap in zip(alts, seen["captions"], strict=True))
    assert seen["glyphs"] and all(seen["glyphs"].values()), f"CJK glyphs drawn as boxes: {seen['glyphs']}"
    assert set(CJK_CATEGORY) <= set(seen["glyphs"])
    text = seen["text"]
    assert "baseline baseline" not in text and "best:" not in text
    assert "keep speculation off" in text and "every arm decodes slower" in text
    assert "workload\tsuite natural: up to 128 output tokens" in text


@needs_chromium
def test_full_report_reads_well_in_chromium(three_arms: Path, tmp_path: Path) -> None:
    seen = probe(three_arms / "report" / "report.html", tmp_path)
    assert seen["misaligned"] == [] and len(seen["images"]) == 4
    assert "<script>alert('x')</script>" in seen["text"]  # model output shown as text, never run
