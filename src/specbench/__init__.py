"""specbench: measure whether speculative decoding makes a model faster, with evidence."""

from __future__ import annotations

__version__ = "0.1.0"

#: Version of the records written to a run directory; bump on any incompatible change.
#: 2: each chunk row gains a sixth field, the server's running token count (None if not sent).
SCHEMA_VERSION = 2
