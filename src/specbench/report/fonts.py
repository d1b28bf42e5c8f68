"""A font with CJK glyphs for the plots, from the fonts the system has.

matplotlib's default DejaVu Sans has no Chinese, Japanese or Korean glyphs, so an arm name or
prompt category in those scripts draws as empty boxes. matplotlib (≥ 3.6) falls back glyph by
glyph along ``font.family``, so DejaVu Sans stays first for Latin text and a CJK face follows.
The faces come from OS packages (Debian/Ubuntu ``fonts-noto-cjk``; ``fonts-wqy-microhei`` or
``fonts-droid-fallback`` also work); with none installed the report says so instead.
"""

from __future__ import annotations

import functools
from pathlib import Path

from matplotlib import font_manager

CJK_FAMILIES = (
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Source Han Sans",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
)
# File-name stems of the same faces: found on disk when matplotlib's font cache predates the install.
_CJK_FILES = ("notosanscjk", "sourcehansans", "wqy-microhei", "wqy-zenhei", "droidsansfallback")
INSTALL_HINT = (
    "install a CJK font (Debian/Ubuntu: apt-get install fonts-noto-cjk) and render the report again"
)


def _known() -> set[str]:
    return {f.name for f in font_manager.fontManager.ttflist}


@functools.cache
def cjk_family() -> str | None:
    """The first CJK family matplotlib can use, registering system font files its cache missed."""
    known = _known()
    found = next((f for f in CJK_FAMILIES if f in known), None)
    if found is not None:
        return found
    for path in font_manager.findSystemFonts():
        if any(stem in Path(path).name.lower() for stem in _CJK_FILES):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # an unreadable or unsupported file: skip it
                continue
    known = _known()
    return next((f for f in CJK_FAMILIES if f in known), None)


def families() -> list[str]:
    """``font.family`` for the plots: DejaVu Sans, then a CJK face when one is installed."""
    cjk = cjk_family()
    return ["DejaVu Sans", cjk] if cjk else ["DejaVu Sans"]


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK ideograph, kana or hangul syllable."""
    return any(
        0x3040 <= ord(ch) <= 0x30FF or 0x3400 <= ord(ch) <= 0x9FFF or 0xAC00 <= ord(ch) <= 0xD7AF
        or 0xF900 <= ord(ch) <= 0xFAFF
        for ch in text
    )  # fmt: skip
