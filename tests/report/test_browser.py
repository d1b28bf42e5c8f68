"""Open report.html in a real headless browser when one is installed (CI adds Chromium)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium on this machine")
def test_report_renders_in_headless_chromium(three_arms: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    page = (three_arms / "report" / "report.html").resolve()
    quiet = ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    argv = [
        *(str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", *quiet, "--no-first-run"),
        *(f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000"),
        page.as_uri(),
    ]
    subprocess.run(argv, capture_output=True, timeout=40, check=False)
    assert shot.is_file() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
