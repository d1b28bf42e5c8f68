"""The console every command prints to, and :func:`printable` for text that comes from data.

Text that comes from data (prompt ids, model output, an engine's log, arm names, error messages
quoting any of these) goes through :func:`printable` before it is printed: an ANSI escape in a
prompt id or a log line would otherwise reach the terminal raw (recolour it, retitle the window,
hide lines), and a "[/x]" in it would be read as rich markup (a MarkupError ended a run).
"""

from __future__ import annotations

import re
import sys

from rich.console import Console
from rich.markup import escape

#: Off a terminal (a log, a pipe) no line is hard-wrapped (issue 44: stderr in a file broke command
#: lines and "4–>\n1000" at 80 columns): rich wraps at the console's width, so it is made wider
#: than any line, and soft wrap leaves long lines whole.
UNWRAPPED = 100_000
console = Console(
    stderr=True, soft_wrap=not sys.stderr.isatty(), width=None if sys.stderr.isatty() else UNWRAPPED
)

# C0 and C1 controls but newline and tab, DEL, and the bidirectional overrides that reorder what
# a terminal shows ("Trojan Source", CVE-2021-42574).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(value: object, markup: bool = True) -> str:
    """``value`` as text safe to print: control characters shown as ``\\x1b``-style escapes;
    with ``markup`` (text placed inside a rich markup string) also "[" escaped for rich."""
    text = _CONTROL.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", str(value)
    )
    return escape(text) if markup else text
