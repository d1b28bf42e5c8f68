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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MASK = "***"
MIN_SECRET = 4
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--hf-token", "-hft", "--token"})
SECRET_FILE_FLAGS = frozenset({"--api-key-file"})
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|PWD|AUTH|CREDENTIAL", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/:@\s\"']*:)(?P<pw>[^@/\s\"']+)@")


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
        text = _URL_PASSWORD.sub(lambda m: m["head"] + MASK + "@", text)
        for secret in sorted(self.secrets, key=len, reverse=True):  # longest first: no partial leftovers
            text = text.replace(secret, MASK)
        return text

    def scrub_file(self, path: Path) -> None:
        """Rewrite ``path`` without secrets (engine logs: the engine writes them itself)."""
        if not self.secrets or not path.is_file():
            return
        text = path.read_text(errors="replace")
        clean = self.scrub(text)
        if clean != text:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(clean)
            tmp.replace(path)


def _file_keys(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        return []
