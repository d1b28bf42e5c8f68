"""Secrets never written: API keys, tokens and URL passwords are replaced by ``***`` in every
file of a run directory (manifest, matrix copy, records, cells, scrapes, engine logs) and so in
every report made from it.

What counts as a secret:

* the value of a secret flag in any argument list (``--api-key K`` or ``--api-key=K``, ...), and
  the keys inside an ``--api-key-file`` (one per line, as llama-server reads them);
* the value of an ``env:`` entry whose name looks secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
  ``*PASSWORD*``, ...);
* the password of a URL (``http://user:pass@host``), and the key read from ``--api-key-env``.

Values shorter than :data:`MIN_SECRET` characters are not replaced as text (replacing "1" would
wreck every number); they are still masked where they appear as a flag value or in a URL.

:meth:`Redactor.scrub` is linear in its input: it runs on every line written, on prompts of any
size and on a matrix copy with any comment. (A single URL regex starting at every letter was
quadratic in an unbroken word: 100 KB took 39 s, 10 MB never finished.)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specbench.store.safeio import guarded, write_atomic

MASK = "***"
MIN_SECRET = 4
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--hf-token", "-hft", "--token"})
SECRET_FILE_FLAGS = frozenset({"--api-key-file"})
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|PWD|AUTH|CREDENTIAL", re.IGNORECASE)
# What follows a URL's "://" when it holds a password: user, ":", password, "@" (the password may
# hold ":"; neither part holds "/", so one "://" never reaches into the next: linear). A failed
# match backtracks only through its own span, and spans never overlap (no possessive quantifiers:
# they need Python 3.11, and the project supports 3.10).
_USERINFO = re.compile(r"://(?=[^/:@\s\"']*:(?P<pw>[^@/\s\"']+)@)")
_SCHEME_TAIL = "0123456789+.-"  # scheme characters that are not letters (RFC 3986 section 3.1)


def secret_env_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def flag_values(args: Sequence[str], flags: Iterable[str]) -> list[str]:
    """Values of ``flags`` in ``args``, in both ``--flag value`` and ``--flag=value`` forms."""
    wanted = set(flags)
    found = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in wanted and eq:
            found.append(value)
        elif arg in wanted and i + 1 < len(args):
            found.append(args[i + 1])
    return found


def mask_args(args: Sequence[str]) -> list[str]:
    """An argument list with secret flag values masked (for command lines shown or stored)."""
    out = list(args)
    for i, arg in enumerate(args):
        name, eq, _ = arg.partition("=")
        if name in SECRET_FLAGS and eq:
            out[i] = f"{name}={MASK}"
        elif arg in SECRET_FLAGS and i + 1 < len(args):
            out[i + 1] = MASK
    return out


@dataclass
class Redactor:
    """Knows a run's secret values; :meth:`scrub` removes them from any text."""

    secrets: set[str] = field(default_factory=set)

    def add(self, *values: str | None) -> None:
        self.secrets.update(v for v in values if v and len(v) >= MIN_SECRET)

    def add_args(self, args: Sequence[str]) -> None:
        self.add(*flag_values(args, SECRET_FLAGS))
        for path in flag_values(args, SECRET_FILE_FLAGS):
            self.add(*_file_keys(Path(path)))

    def add_env(self, env: Mapping[str, str]) -> None:
        self.add(*(value for name, value in env.items() if secret_env_name(name)))

    def scrub(self, text: str) -> str:
        text = mask_url_passwords(text)
        for secret in sorted(self.secrets, key=len, reverse=True):  # longest first: no partial leftovers
            text = text.replace(secret, MASK)
        return text

    def scrub_file(self, path: Path, offset: int = 0) -> None:
        """Rewrite ``path`` from byte ``offset`` on without secrets (engine logs: the engine
        writes them itself; what lies before ``offset`` was scrubbed when its launch ended).
        Bytes that are not UTF-8 are kept as they are."""
        with guarded(path):
            if not path.is_file():
                return
            with path.open("rb") as fh:
                fh.seek(offset)
                raw = fh.read()
        text = raw.decode("utf-8", errors="surrogateescape")
        clean = self.scrub(text)
        if clean == text:
            return
        new = clean.encode("utf-8", errors="surrogateescape")
        if len(new) <= len(raw):  # in place: needs no free space, so a full disk cannot keep a key
            with guarded(path):
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.pwrite(fd, new, offset)
                    os.ftruncate(fd, offset + len(new))
                finally:
                    os.close(fd)
            return
        with guarded(path), path.open("rb") as fh:  # a short URL password became "***": longer
            head = fh.read(offset)
        write_atomic(path, head + new)


def mask_url_passwords(text: str) -> str:
    """``scheme://user:***@host``: what ``[a-zA-Z][a-zA-Z0-9+.-]*://[^/:@\\s"']*:([^@/\\s"']+)@``
    would mask, in one pass. The scheme is checked backwards from each "://" with ``rstrip``,
    not by a regex that starts at every letter of the text."""
    pieces: list[str] = []
    kept = seen = 0  # end of the text copied so far; end of the last "://" or password looked at
    for match in _USERINFO.finditer(text):
        scheme = text[seen : match.start()].rstrip(_SCHEME_TAIL)
        seen = match.end()
        if not scheme or not ("a" <= scheme[-1] <= "z" or "A" <= scheme[-1] <= "Z"):
            continue  # no letter to start a scheme: not a URL
        start, end = match.span("pw")
        pieces += [text[kept:start], MASK]
        kept = seen = end
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def _file_keys(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        return []
